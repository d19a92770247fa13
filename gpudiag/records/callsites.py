"""The program's calls counted per line of its own (parent side, plain frozen dataclasses):
its Keras model calls one at a time (gpudiag.inprogram.kerascalls) and its reads of
tensors back to Python (gpudiag.inprogram.hostreads). Part of a process's record
(gpudiag.records.run.ProcessObservation)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KerasCallSite:
    """One line of the program calling a Keras model method one call at a time
    (gpudiag.inprogram.kerascalls): how many calls, their time, each call's rows."""

    method: str  # predict | predict_on_batch | fit | train_on_batch | evaluate | ... | __call__
    file: str | None
    line: int | None
    code: str
    model: str  # the model's class
    calls: int
    total_s: float
    first_s: float  # the first call (it builds and traces the model's functions)
    median_s: float | None  # the calls after the first
    rows_min: int | None = None  # the leading dimension of each call's input
    rows_max: int | None = None
    models: int | None = None  # calls on another model than the previous call's (None: old)
    trace_s: float | None = None  # tf.function tracing inside the calls (Keras's functions)

    @property
    def where(self) -> str:
        return f"{(self.file or '?').rsplit('/', 1)[-1]}:{self.line}"


@dataclass(frozen=True)
class HostReadSite:
    """One line of the program reading tensors back to Python (gpudiag.inprogram.
    hostreads): ``float(loss)``, ``loss.numpy()`` ... how many reads, their time."""

    file: str | None
    line: int | None
    code: str
    how: str  # float(), .numpy(), int(), bool(), a format, np.asarray()
    reads: int
    total_s: float
    median_s: float | None

    @property
    def where(self) -> str:
        return f"{(self.file or '?').rsplit('/', 1)[-1]}:{self.line}"
