"""The profiled window's tail (gpudiag.inprogram.profilewindow): the process's CPU time over
wall time for the steps right after the window, the cores the program keeps busy in its
steady state (what the what-if model of a parallel map holds its prediction to). The
window's two clocks (the process's CPU time and the wall clock) move only as the test's
steps say, so the readings are exact on an idle machine and on a loaded one: steps that
keep one core busy read one core, steps that wait read none."""

from __future__ import annotations

import contextlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gpudiag.inprogram import profilewindow
from gpudiag.layout import events, loopevents


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


class Clocks:
    """time.process_time and time.perf_counter as the window reads them, moved by a step."""

    def __init__(self) -> None:
        self.cpu_s = self.wall_s = 0.0

    def process_time(self) -> float:
        return self.cpu_s

    def perf_counter(self) -> float:
        return self.wall_s

    def busy(self) -> None:  # a step of 2 ms with one core busy throughout
        self.cpu_s += 0.002
        self.wall_s += 0.002

    def waiting(self) -> None:  # a step of 2 ms that waits (no CPU time)
        self.wall_s += 0.002


@pytest.fixture
def clocks(monkeypatch: pytest.MonkeyPatch) -> Clocks:
    fake = Clocks()
    monkeypatch.setattr(profilewindow, "time", fake)
    return fake


def test_the_steps_after_the_window_give_the_cores_the_program_kept_busy(
        tmp_path: Path, clocks: Clocks) -> None:
    agent, loop = Agent(tmp_path), Loop()
    window = profilewindow.ProfileWindow(agent, profiler())  # type: ignore[arg-type]
    steps(window, loop, 2 + 2 + profilewindow.CPU_STEPS + 5, clocks.busy)
    (use,) = [e for e in agent.events if isinstance(e, loopevents.CpuUse)]
    assert use.source == "Model.fit" and use.steps == profilewindow.CPU_STEPS
    assert use.wall_s == pytest.approx(profilewindow.CPU_STEPS * 0.002)
    assert use.cpu_s / use.wall_s == pytest.approx(1.0), use  # one core busy
    assert use.cores >= 1 and window.done  # nothing more a step: one comparison
    for callback in agent.exits:  # at exit nothing more is said
        callback()
    assert sum(isinstance(e, loopevents.CpuUse) for e in agent.events) == 1


def test_a_program_ending_soon_after_its_window_gives_them_at_exit_or_not_at_all(
        tmp_path: Path, clocks: Clocks) -> None:
    agent, loop = Agent(tmp_path), Loop()
    window = profilewindow.ProfileWindow(agent, profiler())  # type: ignore[arg-type]
    steps(window, loop, 2 + 2 + 12, clocks.waiting)  # 12 steps after it
    for callback in agent.exits:
        callback()
    (use,) = [e for e in agent.events if isinstance(e, loopevents.CpuUse)]
    assert use.steps == 12 and use.cpu_s == 0 and use.wall_s > 0  # waiting: no core busy
    short = Agent(tmp_path)
    w2 = profilewindow.ProfileWindow(short, profiler())  # type: ignore[arg-type]
    steps(w2, loop, 2 + 2 + 3, clocks.busy)  # 3 steps: too few to say
    for callback in short.exits:
        callback()
    assert not any(isinstance(e, loopevents.CpuUse) for e in short.events)
