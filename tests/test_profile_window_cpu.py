"""The profiled window's tail (gpudiag.inprogram.profilewindow): the process's CPU time over
wall time for the steps right after the window, the cores the program keeps busy in its
steady state (what the what-if model of a parallel map holds its prediction to). Driven
with the real clocks: steps that spin the CPU read about one core busy, steps that sleep
read about none."""

from __future__ import annotations

import contextlib
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from gpudiag.inprogram import profilewindow
from gpudiag.layout import events


class Loop:
    label = "Model.fit"


class Agent:
    def __init__(self, run_dir: Path) -> None:
        self.config = SimpleNamespace(profile_warmup_steps=2, profile_steps=2,
                                      run_dir=str(run_dir))
        self.events: list[events.Event] = []
        self.exits: list[Any] = []

    def emit(self, event: events.Event) -> None:
        self.events.append(event)

    def on_exit(self, callback: Any) -> None:
        self.exits.append(callback)

    def quiet(self) -> contextlib.AbstractContextManager[None]:
        return contextlib.nullcontext()

    def hook_error(self, where: str, exc: BaseException) -> None:
        raise AssertionError(f"{where}: {exc}")


def profiler() -> SimpleNamespace:  # the profiler's calls, doing nothing (no TensorFlow)
    experimental = SimpleNamespace(start=lambda logdir: None, stop=lambda: None,
                                   Trace=lambda *a, **k: contextlib.nullcontext())
    return SimpleNamespace(profiler=SimpleNamespace(experimental=experimental))


def steps(window: profilewindow.ProfileWindow, loop: Loop, n: int, work: Any) -> None:
    """The step hooks as they call the window (gpudiag.inprogram.kerashooks ...): only
    while it is not done."""
    for i in range(n):
        if not window.done:
            window.step_begin(loop, i)
        work()
        if not window.done:
            window.step_end(loop, i)


def spin() -> None:
    end = time.perf_counter() + 0.002
    while time.perf_counter() < end:
        pass


def test_the_steps_after_the_window_give_the_cores_the_program_kept_busy(
        tmp_path: Path) -> None:
    agent, loop = Agent(tmp_path), Loop()
    window = profilewindow.ProfileWindow(agent, profiler())  # type: ignore[arg-type]
    steps(window, loop, 2 + 2 + profilewindow.CPU_STEPS + 5, spin)
    (use,) = [e for e in agent.events if isinstance(e, events.CpuUse)]
    assert use.source == "Model.fit" and use.steps == profilewindow.CPU_STEPS
    assert use.wall_s >= profilewindow.CPU_STEPS * 0.002
    assert 0.7 <= use.cpu_s / use.wall_s <= 1.3, use  # one thread spinning: one core
    assert use.cores >= 1 and window.done  # nothing more a step: one comparison
    for callback in agent.exits:  # at exit nothing more is said
        callback()
    assert sum(isinstance(e, events.CpuUse) for e in agent.events) == 1


def test_a_program_ending_soon_after_its_window_gives_them_at_exit_or_not_at_all(
        tmp_path: Path) -> None:
    agent, loop = Agent(tmp_path), Loop()
    window = profilewindow.ProfileWindow(agent, profiler())  # type: ignore[arg-type]
    steps(window, loop, 2 + 2 + 12, lambda: time.sleep(0.002))  # 12 steps after it
    for callback in agent.exits:
        callback()
    (use,) = [e for e in agent.events if isinstance(e, events.CpuUse)]
    assert use.steps == 12 and use.cpu_s / use.wall_s < 0.5  # sleeping: no core busy
    short = Agent(tmp_path)
    w2 = profilewindow.ProfileWindow(short, profiler())  # type: ignore[arg-type]
    steps(w2, loop, 2 + 2 + 3, spin)  # 3 steps: too few to say
    for callback in short.exits:
        callback()
    assert not any(isinstance(e, events.CpuUse) for e in short.events)
