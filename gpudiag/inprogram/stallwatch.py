"""A stalled job named where it waits (in-program; no TensorFlow import of its own).

Every recorded step (gpudiag.inprogram.recorder.STEP_LISTENERS) stamps the time of the latest
finished step: a clock read per step. A daemon thread wakes every POLL_S; once a loop has
started, when no step has finished for the stall timeout (``config.stall_timeout_s``, or
by default STALL_FACTOR times the median of the last periods, at least STALL_FLOOR_S), it
takes every thread's Python stack (``sys._current_frames``: the program is not stopped,
not even paused beyond the moment the stacks are read) and appends one ``stall`` event:
how long, which loop, each thread's frames, and where the step waits:

- ``iterator``: the stepping thread is inside tf.data's iterator (``iterator_ops``) or
  Keras's data adapter: the input pipeline has not delivered the next batch; the frame of
  the program's own code in another thread (a ``from_generator`` generator runs in
  TensorFlow's py_func threads) names the line it waits on;
- ``collective``: inside tf.distribute's cross-device or collective code, or a cluster
  join: another worker has not reached the all-reduce;
- ``lock``: the innermost frame is threading's ``wait``/``acquire``/``join`` or a queue;
- ``user``: the program's own line, anything else.

A task of a multi-worker cluster is watched from the moment it joined (``arm``: the
strategy's constructor returned): a worker that never reaches its first step, or whose
first step waits in the all-reduce for another that never comes, is a stall too
(``since``: ``cluster_joined``). Inside the step function's execution with no Python
frame of TensorFlow's collectives, a cluster task's step waits in the runtime
(``step``: TensorFlow's graph, the all-reduce among it, runs in C++ with no Python frame).

When steps come again a ``stall_end`` event says after how long. The parent shows both as
they happen (gpudiag.run.live) and reports them (``run.stall``).
"""

from __future__ import annotations

import os
import statistics
import sys
import threading
import time
from collections import deque
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.usercode import is_user_file
from gpudiag.layout import events

if TYPE_CHECKING:
    from types import FrameType

    from gpudiag.inprogram.agent import Agent

POLL_S = 0.25
STALL_FLOOR_S = 60.0
# Before a cluster task's first step (counted from its join) the default allows for what
# real jobs do there (building the model, loading data, the other workers starting).
FIRST_STEP_FLOOR_S = 300.0
STALL_FACTOR = 20.0
MAX_FRAMES = 16
_ITERATOR = ("tensorflow/python/data/", "keras/src/trainers/data_adapters",
             "keras/engine/data_adapter")
_COLLECTIVE = ("tensorflow/python/distribute/cross_device", "collective_all_reduce",
               "tensorflow/python/distribute/coordinator", "tensorflow/python/ops/collective",
               "tensorflow/python/distribute/cluster_resolver")
_STEP_CALL = ("tensorflow/python/eager/polymorphic_function/", "tensorflow/python/eager/execute",
              "tensorflow/python/eager/function", "tensorflow/python/client/session")
_LOCK_FUNCS = frozenset({"wait", "acquire", "join", "get", "_wait_for_tstate_lock"})
_LOCK_FILES = ("threading.py", "queue.py", "multiprocessing/", "concurrent/futures/")


def _frames(frame: FrameType | None) -> list[dict[str, Any]]:
    """Outermost first, the last MAX_FRAMES."""
    import linecache

    out = []
    while frame is not None:
        code = frame.f_code
        out.append({"file": code.co_filename, "line": frame.f_lineno,
                    "function": code.co_name,
                    "code": linecache.getline(code.co_filename, frame.f_lineno).strip()[:200],
                    "user": is_user_file(code.co_filename)})
        frame = frame.f_back
    return list(reversed(out))[-MAX_FRAMES:]


def classify(stepping: list[dict[str, Any]], others: list[list[dict[str, Any]]],
             in_cluster: bool = False) -> dict[str, Any]:
    """Where the stepping thread waits: kind, and the program's own frame that says it."""
    files = [f["file"].replace("\\", "/") for f in stepping]
    user = [f for f in stepping if f["user"]]
    innermost = stepping[-1] if stepping else None
    if any(any(m in f for m in _ITERATOR) for f in files):
        # the pipeline's own code of the program (a generator) waits in another thread
        feeding = [t[-1] if t[-1]["user"] else next(f for f in reversed(t) if f["user"])
                   for t in others if any(f["user"] for f in t)]
        return {"kind": "iterator", "frame": user[-1] if user else None,
                "waiting": feeding[0] if feeding else None}
    if any(any(m in f for m in _COLLECTIVE) for f in files):
        return {"kind": "collective", "frame": user[-1] if user else None, "waiting": None}
    if in_cluster and any(any(m in f for m in _STEP_CALL) for f in files):
        return {"kind": "step", "frame": user[-1] if user else None, "waiting": None}
    if innermost is not None and innermost["function"] in _LOCK_FUNCS and \
            any(m in innermost["file"] for m in _LOCK_FILES):
        return {"kind": "lock", "frame": user[-1] if user else None, "waiting": None}
    return {"kind": "user", "frame": user[-1] if user else innermost, "waiting": None}


class StallWatch:
    def __init__(self, agent: Agent, timeout_s: float | None) -> None:
        self.agent = agent
        self.timeout_s = timeout_s
        self.last_step: float | None = None
        self.last_loop: object | None = None
        self.stepping_thread: int | None = None
        self.steps = 0
        self.periods: deque[float] = deque(maxlen=50)
        self.stalled_since: float | None = None
        self.since = "step"  # what the wait is counted from: the last step, or the join
        self.in_cluster = False
        self._pid = os.getpid()
        threading.Thread(target=self._loop, name="gpudiag-stall", daemon=True).start()

    def on_step(self, loop: object, count: int) -> None:
        now = time.monotonic()
        if self.last_step is not None and loop is self.last_loop:
            self.periods.append(now - self.last_step)
        self.last_step, self.last_loop = now, loop
        self.stepping_thread = threading.get_ident()
        self.steps += 1
        self.since = "step"
        if self.stalled_since is not None:
            since, self.stalled_since = self.stalled_since, None
            self.agent.emit(events.StallEnd(after_s=round(now - since, 3)))

    def arm(self) -> None:
        """The program joined a multi-worker cluster: from now on a step is due."""
        self.in_cluster = True
        if self.last_step is None:
            self.last_step, self.since = time.monotonic(), "cluster_joined"

    def timeout(self) -> float:
        if self.timeout_s is not None:
            return self.timeout_s
        if self.since == "cluster_joined":
            return FIRST_STEP_FLOOR_S
        period = statistics.median(self.periods) if self.periods else 0.0
        return max(STALL_FLOOR_S, STALL_FACTOR * period)

    def _loop(self) -> None:
        while os.getpid() == self._pid:
            time.sleep(POLL_S)
            last = self.last_step
            if last is None or self.stalled_since is not None:
                continue
            waited = time.monotonic() - last
            limit = self.timeout()
            if waited >= limit:
                from gpudiag.inprogram.agent import guard

                self.stalled_since = last
                guard("stall capture", self._capture, waited, limit)

    def _capture(self, waited: float, limit: float) -> None:
        own = threading.get_ident()
        names = {t.ident: t.name for t in threading.enumerate()}
        stacks = {ident: _frames(frame) for ident, frame in sys._current_frames().items()
                  if ident != own}
        stepping = self.stepping_thread if self.stepping_thread in stacks else \
            threading.main_thread().ident
        main = stacks.get(stepping or -1, [])
        others = [s for ident, s in stacks.items() if ident != stepping and s]
        where = classify(main, others, self.in_cluster)
        threads = [{"name": names.get(ident, str(ident)), "stepping": ident == stepping,
                    "frames": frames} for ident, frames in stacks.items()]
        buffer = self.last_loop
        self.agent.emit(events.Stall(waited_s=round(waited, 3), timeout_s=round(limit, 3),
                        steps=self.steps, loop=getattr(buffer, "fields", None),
                        loop_kind=getattr(buffer, "kind", None),
                        median_period_s=statistics.median(self.periods) if self.periods
                        else None, where=where, threads=threads, since=self.since))


WATCH: StallWatch | None = None


def install(agent: Agent) -> None:
    global WATCH
    from gpudiag.inprogram import recorder

    timeout = agent.config.stall_timeout_s
    if timeout is not None and timeout <= 0:
        return  # --stall-timeout 0: off
    WATCH = StallWatch(agent, timeout)
    recorder.STEP_LISTENERS.append(_on_step)


def arm() -> None:
    """Called when the program joined a multi-worker cluster (gpudiag.inprogram.strategies)."""
    if WATCH is not None:
        WATCH.arm()


def _on_step(loop: object, count: int) -> None:
    if WATCH is not None:
        try:
            WATCH.on_step(loop, count)
        except Exception as exc:  # never into the program
            WATCH.agent.hook_error("stall watch", exc)
