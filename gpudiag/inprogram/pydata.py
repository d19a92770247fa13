"""Input from Python data classes (Keras 3): the seconds Keras spends taking each batch
from a ``keras.utils.PyDataset`` (its ``__getitem__``, or, with workers, the wait on its
workers' queue) or from a Python generator passed to ``fit``.

Keras feeds both to its TensorFlow trainer through ``tf.data.Dataset.from_generator``
over a Python generator of its own (``PyDatasetAdapter._get_iterator``;
``GeneratorDataAdapter.generator``): that generator is wrapped so each batch it yields is
timed (two clock reads and an addition a batch, on tf.data's thread that runs it), and at
the process's exit one events.PyDataInput per data class sums them up with the class's
workers, use_multiprocessing and max_queue_size. tf_keras (Keras 2) is not hooked.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

from gpudiag.inprogram.agent import patch

MAX_TIMES = 20_000  # batch times kept for the median (the totals count every batch)


class Timed:
    """One data class's batches: count, seconds, and the first MAX_TIMES batch times."""

    def __init__(self, kind: str, source: Any) -> None:
        self.kind = kind
        self.class_name = type(source).__name__ if kind == "PyDataset" else \
            getattr(source, "__qualname__", type(source).__name__)
        self.workers = getattr(source, "workers", None) if kind == "PyDataset" else None
        self.multiprocessing = getattr(source, "use_multiprocessing", None) \
            if kind == "PyDataset" else None
        self.queue = getattr(source, "max_queue_size", None) if kind == "PyDataset" else None
        self.batches = 0
        self.total_s = 0.0
        self.times: list[float] = []

    def wrap(self, batches: Iterator[Any]) -> Iterator[Any]:
        clock = time.perf_counter
        while True:
            t0 = clock()
            try:
                batch = next(batches)
            except StopIteration:
                return
            dt = clock() - t0
            self.batches += 1
            self.total_s += dt
            if len(self.times) < MAX_TIMES:
                self.times.append(dt)
            yield batch

    def event(self) -> Any:
        from gpudiag.layout import events

        times = sorted(self.times)
        return events.PyDataInput(
            source=self.kind, class_name=self.class_name, workers=self.workers
            if isinstance(self.workers, int) else None,
            use_multiprocessing=self.multiprocessing
            if isinstance(self.multiprocessing, bool) else None,
            max_queue_size=self.queue if isinstance(self.queue, int) else None,
            batches=self.batches, total_s=self.total_s,
            median_s=times[len(times) // 2] if times else None,
            p90_s=times[int(0.9 * (len(times) - 1))] if times else None)


def install(agent: Any) -> None:
    import importlib

    base = "keras.src.trainers.data_adapters."
    seen: list[Timed] = []
    agent.on_exit(lambda: [agent.emit(t.event()) for t in seen if t.batches])

    py = importlib.import_module(base + "py_dataset_adapter").PyDatasetAdapter
    get_iterator = py._get_iterator
    if not hasattr(get_iterator, "__gpudiag_wrapped__"):
        def _get_iterator(self: Any) -> Any:
            timed = self.__dict__.get("_gpudiag_timed")
            if timed is None:
                timed = self.__dict__["_gpudiag_timed"] = Timed("PyDataset", self.py_dataset)
                seen.append(timed)
            return timed.wrap(get_iterator(self))

        _get_iterator.__gpudiag_wrapped__ = get_iterator  # type: ignore[attr-defined]
        patch(py, "_get_iterator", _get_iterator)

    gen = importlib.import_module(base + "generator_data_adapter").GeneratorDataAdapter
    init = gen.__init__
    if not hasattr(init, "__gpudiag_wrapped__"):
        def __init__(self: Any, generator: Any, *args: Any, **kwargs: Any) -> None:
            init(self, generator, *args, **kwargs)
            made: Callable[[], Iterator[Any]] | None = self.__dict__.get("generator")
            if made is None or not callable(made):
                return
            timed = Timed("generator", generator)
            seen.append(timed)
            self.generator = lambda: timed.wrap(iter(made()))

        __init__.__gpudiag_wrapped__ = init  # type: ignore[attr-defined]
        patch(gen, "__init__", __init__)
