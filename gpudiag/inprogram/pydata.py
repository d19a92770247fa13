"""Input from Python data classes (Keras 3): the seconds Keras spends taking each batch
from a ``keras.utils.PyDataset`` (its ``__getitem__``, or, with workers, the wait on its
workers' queue) or from a Python generator passed to ``fit``.

Keras feeds both to its TensorFlow trainer through ``tf.data.Dataset.from_generator``
over a Python generator of its own (``PyDatasetAdapter._get_iterator``;
``GeneratorDataAdapter.generator``): that generator is wrapped so each batch it yields is
timed (wall and CPU clocks, on tf.data's thread that runs it); with thread workers, each
``__getitem__`` they run (the module's ``get_index``) has its CPU time taken (the GIL's
waits are not CPU). At the process's exit one loopevents.PyDataInput per data class sums them
up with the class's workers, use_multiprocessing and max_queue_size. A worker process's
``__getitem__`` runs in that process and is not timed; tf_keras (Keras 2) is not hooked.
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
        self.cpu: list[float] = []  # the CPU (thread) time of each batch made
        self.items = 0  # __getitem__ calls timed on thread workers

    def wrap(self, batches: Iterator[Any]) -> Iterator[Any]:
        clock, cpu = time.perf_counter, time.thread_time
        while True:
            t0, c0 = clock(), cpu()
            try:
                batch = next(batches)
            except StopIteration:
                return
            dt, dc = clock() - t0, cpu() - c0
            self.batches += 1
            self.total_s += dt
            if len(self.times) < MAX_TIMES:
                self.times.append(dt)
                if self.items == 0:  # made on this thread (no workers): its CPU time
                    self.cpu.append(dc)
            yield batch

    def item(self, cpu_s: float) -> None:
        """One __getitem__ on a thread worker: its CPU time (the GIL's waits left out)."""
        if self.items == 0:
            self.cpu = []  # the batches are made on the workers, not where they are taken
        self.items += 1
        if len(self.cpu) < MAX_TIMES:
            self.cpu.append(cpu_s)

    def event(self) -> Any:
        from gpudiag.layout import loopevents

        times = sorted(self.times)
        return loopevents.PyDataInput(
            source=self.kind, class_name=self.class_name, workers=self.workers
            if isinstance(self.workers, int) else None,
            use_multiprocessing=self.multiprocessing
            if isinstance(self.multiprocessing, bool) else None,
            max_queue_size=self.queue if isinstance(self.queue, int) else None,
            batches=self.batches, total_s=self.total_s,
            median_s=times[len(times) // 2] if times else None,
            p90_s=times[int(0.9 * (len(times) - 1))] if times else None,
            cpu_median_s=sorted(self.cpu)[len(self.cpu) // 2] if self.cpu else None,
            cpu_where="workers" if self.items else "taken")


def install(agent: Any) -> None:
    import importlib

    base = "keras.src.trainers.data_adapters."
    seen: list[Timed] = []
    agent.on_exit(lambda: [agent.emit(t.event()) for t in seen if t.batches])

    module = importlib.import_module(base + "py_dataset_adapter")
    py = module.PyDatasetAdapter
    get_iterator = py._get_iterator
    by_uid: dict[Any, Timed] = {}  # a thread enqueuer's uid -> its data class's record
    if not hasattr(get_iterator, "__gpudiag_wrapped__"):
        def _get_iterator(self: Any) -> Any:
            timed = self.__dict__.get("_gpudiag_timed")
            if timed is None:
                timed = self.__dict__["_gpudiag_timed"] = Timed("PyDataset", self.py_dataset)
                seen.append(timed)
            enqueuer = self.__dict__.get("enqueuer")
            if enqueuer is not None and not timed.multiprocessing:
                by_uid[getattr(enqueuer, "uid", None)] = timed
            return timed.wrap(get_iterator(self))

        patch(py, "_get_iterator", _get_iterator, wraps=get_iterator)
    get_index = module.get_index
    if not hasattr(get_index, "__gpudiag_wrapped__"):
        def timed_get_index(uid: Any, i: Any) -> Any:
            # a thread worker's __getitem__ (a worker process's runs in another process:
            # this wrapper is only the name it pickles by)
            c0 = time.thread_time()
            try:
                return get_index(uid, i)
            finally:
                timed = by_uid.get(uid)
                if timed is not None:
                    timed.item(time.thread_time() - c0)

        for name in ("__module__", "__name__", "__qualname__", "__doc__"):
            setattr(timed_get_index, name, getattr(get_index, name))
        patch(module, "get_index", timed_get_index, wraps=get_index)

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

        patch(gen, "__init__", __init__, wraps=init)
