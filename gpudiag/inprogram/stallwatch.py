"""A stalled job named where it waits (in-program; no TensorFlow import of its own).

Every recorded step (gpudiag.inprogram.recorder.STEP_LISTENERS) stamps the time of the latest
finished step: a clock read per step. A daemon thread wakes every POLL_S; once a loop has
started, when no step has finished for the stall timeout (``config.stall_timeout_s``, or
by default STALL_FACTOR times the median of the last periods, at least STALL_FLOOR_S), it
takes every thread's Python stack (``sys._current_frames``: the program is not stopped,
not even paused beyond the moment the stacks are read) and appends one ``stall`` event:
how long, which loop, each thread's frames, and where the step waits:

- ``server_join``: the stepping thread is in tf.distribute.Server.join();
- ``iterator``: the step waits for its input: the stepping thread is inside tf.data's
  iterator or Keras's data adapter, or inside the step function's call (Keras 3 and a
  tf.function loop fetch the next batch inside the step, in C++) while a
  ``Dataset.from_generator`` generator runs on a thread TensorFlow owns; ``waiting`` is
  the program's innermost frame on that thread (the generator's line), ``via`` what runs
  it;
- ``collective``: inside tf.distribute's cross-device or collective code, or a cluster
  join: another worker has not reached the all-reduce;
- ``py_function``: inside the step function's call while a tf.py_function /
  numpy_function runs the program's code on another thread (``waiting``: its line);
- ``step`` (a cluster task) / ``runtime``: inside the step function's call with no Python
  code of the program running for it;
- ``queue`` / ``thread_join`` / ``lock``: the innermost frames are queue.Queue's,
  Thread.join's or another threading wait;
- ``user``: the program's own line, anything else.

On every thread the program's own innermost frame is the one named (``frame`` on the
stepping thread, ``waiting`` on the one it waits for), never a library's.

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
from gpudiag.layout import loopevents

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
_LOCK_FUNCS = frozenset({"wait", "acquire", "join", "get", "put", "_wait_for_tstate_lock"})
_GENERATOR = ("tensorflow/python/data/ops/from_generator_op",)
_PY_FUNC = ("tensorflow/python/ops/script_ops",)
_SERVER_JOIN = ("tensorflow/python/training/server_lib",)
_LOCK_FILES = ("threading.py", "queue.py", "multiprocessing/", "concurrent/futures/")


def _frames(frame: FrameType | None) -> list[dict[str, Any]]:
    """Outermost first, the last MAX_FRAMES; the gates around gpudiag's hooks left out
    (gpudiag.inprogram.agent.patch: they would push the program's own frames out)."""
    import linecache

    from gpudiag.inprogram.agent import is_gate

    out = []
    while frame is not None:
        code = frame.f_code
        if is_gate(code):
            frame = frame.f_back
            continue
        line = frame.f_lineno  # None in a frame between lines (Python 3.11: another thread's)
        out.append({"file": code.co_filename, "line": line, "function": code.co_name,
                    "code": linecache.getline(code.co_filename, line).strip()[:200]
                    if line is not None else "",
                    "user": is_user_file(code.co_filename)})
        frame = frame.f_back
    return list(reversed(out))[-MAX_FRAMES:]


def _has(frames: list[dict[str, Any]], marks: tuple[str, ...]) -> bool:
    return any(any(m in f["file"].replace("\\", "/") for m in marks) for f in frames)


def _own(frames: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The program's innermost frame of a thread (preferred over any library frame)."""
    return next((f for f in reversed(frames) if f["user"]), None)


def _feeder(others: list[list[dict[str, Any]]]) -> tuple[str, dict[str, Any]] | None:
    """Another thread running the program's code for TensorFlow: a Dataset.from_generator
    generator, a tf.py_function / numpy_function, Keras's PyDataset workers, or any other
    thread of the program's; (what it is, its innermost frame of the program's)."""
    ranked: list[tuple[int, str, dict[str, Any]]] = []
    for t in others:
        own = _own(t)
        if own is None:
            continue
        what = ("generator" if _has(t, _GENERATOR) else "py_function" if _has(t, _PY_FUNC)
                else "keras_data" if _has(t, _ITERATOR) else "thread")
        ranked.append((("generator", "py_function", "keras_data", "thread").index(what),
                       what, own))
    if not ranked:
        return None
    _, what, frame = min(ranked, key=lambda r: r[0])
    return what, frame


def _blocking(stepping: list[dict[str, Any]]) -> str | None:
    """What the stepping thread waits on, from the library frames below the program's
    innermost one: a queue (queue.Queue's get/put wait on a condition), another thread's
    end (Thread.join), a lock or condition."""
    tail: list[dict[str, Any]] = []
    for f in reversed(stepping):
        if f["user"]:
            break
        tail.append(f)
    innermost = stepping[-1] if stepping else None
    if innermost is None or innermost["function"] not in _LOCK_FUNCS or \
            not any(m in innermost["file"].replace("\\", "/") for m in _LOCK_FILES):
        return None
    files = [f["file"].replace("\\", "/") for f in tail]
    if any(f.endswith("/queue.py") or "multiprocessing/queues" in f for f in files):
        return "queue"
    if any(f["function"] == "join" and f["file"].endswith("threading.py") for f in tail):
        return "thread_join"
    return "lock"


def classify(stepping: list[dict[str, Any]], others: list[list[dict[str, Any]]],
             in_cluster: bool = False) -> dict[str, Any]:
    """Where the stepping thread waits: kind, the program's own frame on the stepping
    thread (``frame``), and, when the step waits for code of the program that runs on
    another thread (a generator, a py_function), that thread's frame (``waiting``)."""
    own = _own(stepping)
    innermost = stepping[-1] if stepping else None
    feeder = _feeder(others)
    feeding = feeder[1] if feeder and feeder[0] != "thread" else None

    def where(kind: str, frame: dict[str, Any] | None = own,
              waiting: dict[str, Any] | None = None, via: str | None = None
              ) -> dict[str, Any]:
        return {"kind": kind, "frame": frame, "waiting": waiting, "via": via}

    if _has(stepping, _SERVER_JOIN):
        return where("server_join")
    if _has(stepping, _ITERATOR):
        # the pipeline's own code of the program (a generator) waits in another thread
        return where("iterator", waiting=feeder[1] if feeder else None,
                     via=feeder[0] if feeder else None)
    if _has(stepping, _COLLECTIVE):
        return where("collective")
    in_step = _has(stepping, _STEP_CALL)
    if in_step and feeder is not None and feeder[0] == "generator":
        # Keras 3 and a tf.function loop fetch the next batch inside the step function:
        # the step waits for the generator's next element
        return where("iterator", waiting=feeder[1], via="generator")
    if in_step and feeding is not None:
        return where("py_function", waiting=feeding, via=feeder[0] if feeder else None)
    if in_step:
        return where("step" if in_cluster else "runtime")
    blocking = _blocking(stepping)
    if blocking is not None:
        return where(blocking)
    return where("user", own or innermost)


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
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpudiag-stall", daemon=True)
        self._thread.start()

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
            self.agent.emit(loopevents.StallEnd(after_s=round(now - since, 3)))

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

    def stop(self) -> None:
        """Its thread ends, and is waited for (a second at most: a capture under way
        finishes on its own) unless this is that thread (gpudiag.inprogram.install
        .uninstall; watch() leaves no thread of gpudiag's behind its block)."""
        self._pid = -1
        self._stopped.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(1.0)

    def _loop(self) -> None:
        while not self._stopped.wait(POLL_S) and os.getpid() == self._pid:
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
        self.agent.emit(loopevents.Stall(waited_s=round(waited, 3), timeout_s=round(limit, 3),
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
