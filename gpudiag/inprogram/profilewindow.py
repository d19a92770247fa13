"""The profiler window: a trace of a few of the program's own steps, after warm-up.

Whichever step source first reaches step ``profile_warmup_steps`` (counting from 0: the
first calls, with tracing and compilation, are left out) owns the window: the program's
step tf.function, a Keras ``fit`` batch, or a ``Session.run`` of the same fetches. The
profiler (``tf.profiler.experimental.start``) runs for ``profile_steps`` of that source's
steps, each marked with ``tf.profiler.experimental.Trace("train", step_num=i)`` so
gpudiag.readers.traces finds the window, and writes ``<run dir>/program-<pid>/plugins/profile/
<timestamp>/<host>.xplane.pb``, where TensorBoard's profile plugin looks. A run that ends
inside the window is stopped at exit (a shorter window).

In a MultiWorkerMirroredStrategy cluster only the coordination leader (the chief, else
worker 0) gets a window; the other tasks ``forgo`` theirs (gpudiag.inprogram.strategies): on
this project's machine TensorFlow 2.21 aborted a worker that was not the leader with
``free(): invalid pointer`` as the profiler stopped, in 4 of 64 two-worker runs with both
traced, and in 0 of 80 with the leader alone; gpudiag must never break the program it
watches.

Right after the window, for CPU_STEPS more steps of the same source (or to the program's
exit, from 10 steps on), the process's CPU time over wall time is taken: two clock reads
a step, one ``CpuUse`` event (how many cores the program keeps busy in its steady state).

Outside the window and that count this costs one comparison per step.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.layout import events, loopevents, run_tb_name

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent


CPU_STEPS = 50  # steps after the window over which the program's CPU use is taken
CPU_STEPS_LEAST = 10  # a program that ends sooner: its CPU use from this many, else none


class ProfileWindow:
    def __init__(self, agent: Agent, tf: ModuleType) -> None:
        self.agent = agent
        self.tf = tf
        self.warmup = agent.config.profile_warmup_steps
        self.steps = agent.config.profile_steps
        self.done = self.steps <= 0  # nothing more to do: the callers' one comparison a step
        self.window_done = self.done  # the trace is over (its CPU-use tail may go on)
        self.owner: object | None = None
        self.started = False
        self.traced: list[int] = []
        self._marker: Any = None
        self.logdir = ""
        self._cpu: tuple[float, float] | None = None  # process and wall clock at the start
        self._cpu_steps = 0
        self._cpu_last: tuple[float, float] = (0.0, 0.0)  # at the latest step's end
        agent.on_exit(self.finish)

    def forgo(self, reason: str) -> None:
        """No window in this process (recorded as ``skipped`` with the reason)."""
        if self.done or self.started:
            return
        self.done = self.window_done = True
        self.agent.emit(events.Profile(status="skipped", logdir="", source=None, first_step=None,
                        steps=[], error=reason))

    def step_begin(self, source: object, index: int) -> None:
        if self.done or self.window_done:
            return
        if self.owner is None:
            if index < self.warmup:
                return
            self.owner = source
            self._start(source, index)
            if self.window_done:
                return
        if source is not self.owner:
            return
        try:
            self._marker = self.tf.profiler.experimental.Trace("train", step_num=index, _r=1)
            self._marker.__enter__()
        except Exception as exc:
            self._marker = None
            self.agent.hook_error("profiler step marker", exc)

    def step_end(self, source: object, index: int) -> None:
        if self._cpu is not None and source is self.owner:
            self._cpu_steps += 1
            self._cpu_last = (time.process_time(), time.perf_counter())
            if self._cpu_steps >= CPU_STEPS:
                self._cpu_use()
            return
        if self.window_done or source is not self.owner or not self.started:
            return
        if self._marker is not None:
            marker, self._marker = self._marker, None
            try:
                marker.__exit__(None, None, None)
            except Exception as exc:
                self.agent.hook_error("profiler step marker", exc)
        self.traced.append(index)
        if len(self.traced) >= self.steps:
            self._stop(complete=True)

    def _start(self, source: object, index: int) -> None:
        self.logdir = str(Path(self.agent.config.run_dir) / run_tb_name(os.getpid()))
        try:
            with self.agent.quiet():
                self.tf.profiler.experimental.start(self.logdir)
        except Exception as exc:
            self.done = self.window_done = True
            self.agent.emit(events.Profile(status="failed", logdir=self.logdir,
                            source=getattr(source, "label", str(source)), first_step=index,
                            steps=[], error=f"{type(exc).__name__}: {exc}"))
            return
        self.started = True
        self.agent.emit(events.Profile(status="started", logdir=self.logdir,
                        source=getattr(source, "label", str(source)), first_step=index,
                        steps=[], error=None))

    def _stop(self, *, complete: bool) -> None:
        self.window_done = True
        self.done = not complete  # a complete window goes on to its CPU-use tail
        error = None
        try:
            with self.agent.quiet():
                self.tf.profiler.experimental.stop()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
        self.agent.emit(events.Profile(status="stopped" if complete else "stopped-at-exit",
                        logdir=self.logdir, source=getattr(self.owner, "label", None),
                        first_step=self.traced[0] if self.traced else None,
                        steps=list(self.traced), error=error))
        if complete:  # the steady steps after it: how many cores the program keeps busy
            self._cpu = (time.process_time(), time.perf_counter())

    def _cpu_use(self) -> None:
        if self._cpu is None:
            return
        (cpu0, wall0), self._cpu = self._cpu, None
        self.done = True
        cpu1, wall1 = self._cpu_last
        try:
            cores = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            cores = os.cpu_count() or 1
        self.agent.emit(loopevents.CpuUse(source=getattr(self.owner, "label", None),
                                      steps=self._cpu_steps,
                                      cpu_s=cpu1 - cpu0, wall_s=wall1 - wall0,
                                      cores=cores))

    def finish(self) -> None:
        """At exit: stop a window the program did not run to its end; the CPU use of the
        steps after a window, when fewer than CPU_STEPS came."""
        if self._cpu is not None and self._cpu_steps >= CPU_STEPS_LEAST:
            self._cpu_use()
        self._cpu = None
        if self.started and not self.window_done:
            if self._marker is not None:
                self._marker.__exit__(None, None, None)
                self._marker = None
            self._stop(complete=False)
