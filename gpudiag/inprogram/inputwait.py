"""The program's own waits for input: seconds inside ``next()`` of a tf.data iterator.

A custom loop takes its batch in Python (``next(iterator)``, ``for x, y in dataset``)
before it calls its step: ``OwnedIterator.__next__`` is wrapped to add the call's time to
one clock, which each step row then takes (gpudiag.inprogram.functions, eagersteps): the
wait that fell in that step's start-to-start period. Two clock reads and an addition per
batch; nothing else. Keras ``fit`` takes its batches inside its own tf.function (the
iterator's get_next is an op of the graph), so no Python ``next`` is seen there and its
rows have no wait: the step series cannot split fit's input wait.

``next()`` has a cost of its own even when its batch is ready (the eager op, the Python
around it): prefetch cannot hide that part. Once per process, at the FLOOR_AT-th timed
``next``, that floor is measured on the batch the program just received: a dataset of
that one element, repeated and prefetched (its buffer full), read FLOOR_CALLS times (about 15 ms in
all); the median call is the floor (loopevents.InputFloor). Its seconds are kept off the wait clock.
"""

from __future__ import annotations

import time
from typing import Any

from gpudiag.inprogram.agent import patch, unwrapped

_clock = {"s": 0.0, "seen": False, "calls": 0}
FLOOR_AT = 50  # the timed next() after which the floor is measured (past the warm-up)
FLOOR_CALLS = 20  # next() calls timed on the full buffer (after FLOOR_WARM untimed)
FLOOR_WARM = 3


def take() -> float | None:
    """The seconds waited since the last take (None: no iterator was ever timed)."""
    if not _clock["seen"]:
        return None
    waited, _clock["s"] = _clock["s"], 0.0
    return waited


def measure_floor(element: Any) -> dict[str, Any]:
    """The seconds of one ``next()`` on a prefetched dataset whose buffer is full, its
    element the program's own batch: the median, the 10th percentile and the calls."""
    import tensorflow as tf

    ds = tf.data.Dataset.from_tensors(element).repeat().prefetch(FLOOR_WARM + 2)
    it = iter(ds)
    clock = time.perf_counter
    for _ in range(FLOOR_WARM):
        next(it)
    times = []
    for _ in range(FLOOR_CALLS):
        time.sleep(0.0005)  # as between a loop's calls (back to back, next() is cheaper)
        t0 = clock()
        next(it)
        times.append(clock() - t0)
    times.sort()
    return {"floor_s": times[len(times) // 2], "p10_s": times[len(times) // 10],
            "calls": len(times)}


def _floor(agent: Any, element: Any) -> None:
    from gpudiag.layout import loopevents

    found = measure_floor(element)
    agent.emit(loopevents.InputFloor(floor_s=found["floor_s"], p10_s=found["p10_s"],
                                 calls=found["calls"]))


def install(agent: Any = None) -> None:
    from tensorflow.python.data.ops import iterator_ops

    cls = iterator_ops.OwnedIterator
    original = unwrapped(cls, "__next__")
    if original is None:
        return
    clock = time.perf_counter

    def __next__(self: Any) -> Any:
        t0 = clock()
        try:
            out = original(self)
        finally:
            _clock["s"] += clock() - t0
            _clock["seen"] = True
            _clock["calls"] += 1
        if _clock["calls"] == FLOOR_AT and agent is not None:
            from gpudiag.inprogram.agent import guard

            guard("input floor", _floor, agent, out)  # off the wait clock
        return out

    patch(cls, "__next__", __next__, wraps=original)
