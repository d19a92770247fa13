"""The program's own waits for input: seconds inside ``next()`` of a tf.data iterator.

A custom loop takes its batch in Python (``next(iterator)``, ``for x, y in dataset``)
before it calls its step: ``OwnedIterator.__next__`` is wrapped to add the call's time to
one clock, which each step row then takes (gpudiag.inprogram.functions, eagersteps): the
wait that fell in that step's start-to-start period. Two clock reads and an addition per
batch; nothing else. Keras ``fit`` takes its batches inside its own tf.function (the
iterator's get_next is an op of the graph), so no Python ``next`` is seen there and its
rows have no wait: the step series cannot split fit's input wait.
"""

from __future__ import annotations

import time
from typing import Any

from gpudiag.inprogram.agent import patch

_clock = {"s": 0.0, "seen": False}


def take() -> float | None:
    """The seconds waited since the last take (None: no iterator was ever timed)."""
    if not _clock["seen"]:
        return None
    waited, _clock["s"] = _clock["s"], 0.0
    return waited


def install() -> None:
    from tensorflow.python.data.ops import iterator_ops

    cls = iterator_ops.OwnedIterator
    original = cls.__next__
    if hasattr(original, "__gpudiag_wrapped__"):
        return
    clock = time.perf_counter

    def __next__(self: Any) -> Any:
        t0 = clock()
        try:
            return original(self)
        finally:
            _clock["s"] += clock() - t0
            _clock["seen"] = True

    __next__.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
    patch(cls, "__next__", __next__)
