"""Eager training loops: a step the program runs without tf.function.

``tf.GradientTape.gradient`` is wrapped: a call made while TensorFlow executes eagerly
(not inside a tf.function being traced) from the program's own code (not Keras's
``run_eagerly`` fit) is one training step of an eager loop. Each such call is timed start
to start (one clock read and a list append, as a step function's call is) and written as
``eager_steps`` rows (gpudiag.inprogram.recorder.StepBuffer), keyed by the program's
function that computes the gradient (``<module>`` for a loop at the top level); its first
call also writes ``eager_loop``: where the step is, for the fix. The calls drive the
profiler window like any step source: a step is one gradient call to the next.

Outside eager loops this costs one ``executing_eagerly()`` per gradient call (none in a
tf.function's calls: the tape runs only while it is traced).
"""

from __future__ import annotations

import linecache
import time
from collections.abc import Callable
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import inputwait
from gpudiag.inprogram.agent import caller_frame, wrap_once
from gpudiag.inprogram.config import UNBUFFERED_FIRST_STEPS
from gpudiag.inprogram.recorder import StepBuffer
from gpudiag.inprogram.usercode import is_user_file
from gpudiag.layout import loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent


class EagerSource:
    """One eager step of the program (the code that calls ``tape.gradient``)."""

    def __init__(self, agent: Agent, code: CodeType, line: int) -> None:
        self.agent = agent
        self.name = code.co_qualname if hasattr(code, "co_qualname") else code.co_name
        self.label = f"eager step {self.name}"
        self.line = line  # a step computing several gradients is timed at its first
        self.calls = 0
        self.begun: int | None = None
        self.buffer = StepBuffer(agent.emit, "eager_steps", agent.config.flush_interval_s,
                                 UNBUFFERED_FIRST_STEPS, None, step=self.name)
        module = code.co_name == "<module>"
        agent.emit(loopevents.EagerLoop(step=self.name, file=code.co_filename, line=line,
                                    def_line=None if module else code.co_firstlineno,
                                    code=linecache.getline(code.co_filename, line).strip()))
        agent.on_exit(self.at_exit)

    def step(self) -> None:
        index = self.calls
        self.calls += 1
        profile = self.agent.profile
        if profile is not None and not profile.done:
            if self.begun is not None:
                profile.step_end(self, self.begun)
            profile.step_begin(self, index)
            self.begun = index
        row: dict[str, Any] = {"i": index, "t0": time.time()}
        waited = inputwait.take()
        if waited is not None:
            row["wait_s"] = waited
        self.buffer.add(row)

    def at_exit(self) -> None:
        profile = self.agent.profile
        if profile is not None and not profile.done and self.begun is not None:
            profile.step_end(self, self.begun)
        self.buffer.flush()


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.eager import backprop, context

    wrap_once(backprop.GradientTape, "gradient",
              lambda original: _gradient(agent, context.executing_eagerly, original))


def _gradient(agent: Agent, executing_eagerly: Callable[[], bool],
              original: Callable[..., Any]) -> Callable[..., Any]:
    """GradientTape.gradient, each eager call from the program's line a step there."""
    sources: dict[CodeType, EagerSource | None] = {}

    def seen(frame: Any) -> None:
        code = frame.f_code
        if code not in sources:
            sources[code] = EagerSource(agent, code, frame.f_lineno) \
                if is_user_file(code.co_filename) else None
        source = sources[code]
        if source is not None and frame.f_lineno == source.line:
            source.step()

    def gradient(self: Any, *args: Any, **kwargs: Any) -> Any:
        if executing_eagerly():
            try:
                seen(caller_frame(1))
            except Exception as exc:
                agent.hook_error("an eager gradient call", exc)
        return original(self, *args, **kwargs)

    return gradient
