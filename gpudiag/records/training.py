"""What `gpudiag scaling` sends its probe children and what they send back, as typed records.

The parent (gpudiag/commands/scaling.py, no TensorFlow) builds a ``TrainingConfig`` or an
``AllreduceConfig``; gpudiag.procs.runner writes its ``to_dict()`` to the child's config.json;
the child (gpudiag/probes/training.py, allreduce.py) reads it back with ``from_dict``,
runs, and returns a ``TrainingResult`` / ``AllreduceResult`` as ``to_dict()``, which the
parent reads back with ``from_dict``. One module on both sides of the process boundary,
so neither side spells a key, and every default lives here once: ``Workload()`` holds
the training defaults the CLI shows (`gpudiag scaling --help`).

Imports no TensorFlow (the parent imports it); only the standard library and
gpudiag.probes.devices' DeviceSetup record. A non-finite float (a diverged loss) is ``None``
in these records and in the JSON, which stays strict.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, asdict, dataclass, field, fields
from typing import TYPE_CHECKING, Any, ClassVar, Self, TypeVar

from gpudiag.records.devices import DEFAULT_VIRTUAL_GPU_MEMORY_MB, DeviceSetup

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

    R = TypeVar("R", bound=DataclassInstance)
else:
    R = TypeVar("R")

STRATEGIES = ("towers", "mirrored", "keras")
VARIABLES_ON = ("cpu", "device")
MIB = 1 << 20
MAX_VIRTUAL_CPU_DEVICES = 16  # without a GPU: at most this many virtual CPU devices
MAX_PROFILE_STEPS = 10  # the profiler window's longest (a trace grows with every step)
DEFAULT_ALLREDUCE_MIN_MB = 1.0
DEFAULT_ALLREDUCE_MAX_MB = 256.0


def allreduce_sizes(min_mb: float, max_mb: float) -> list[int]:
    """Message sizes in bytes from min to max MiB, doubling (nccl-tests' -f 2)."""
    sizes, size = [], int(min_mb * MIB)
    while size <= int(max_mb * MIB):
        sizes.append(size)
        size *= 2
    return sizes


DEFAULT_SIZES_BYTES = allreduce_sizes(DEFAULT_ALLREDUCE_MIN_MB, DEFAULT_ALLREDUCE_MAX_MB)


def finite(value: float | None) -> float | None:
    """``value`` as a float, or None when it is None, NaN or infinite."""
    if value is None:
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _build(cls: type[R], values: Mapping[str, Any], /,
           **convert: Callable[[Any], Any]) -> R:
    """``cls(**values)``, each field named in ``convert`` passed through its converter
    (nested records); an unknown or a missing required key is a ValueError naming it."""
    unknown = sorted(set(values) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"{cls.__name__}: unknown field(s) {', '.join(unknown)}")
    missing = [f.name for f in fields(cls) if f.name not in values
               and f.default is MISSING and f.default_factory is MISSING]
    if missing:
        raise ValueError(f"{cls.__name__}: missing field(s) {', '.join(missing)}")
    return cls(**{k: convert[k](v) if k in convert else v for k, v in values.items()})


class Plain:
    """Base of the records here: ``to_dict`` is ``asdict``, ``from_dict`` is ``_build``
    (strict: an unknown or a missing required key is a ValueError). A record holding
    records overrides them, to convert those."""

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Self:
        return _build(cls, data)


# ------------------------------------------------------------------------ training


@dataclass(frozen=True)
class Workload(Plain):
    """What every scaling configuration trains: the same for each strategy and device
    count. The defaults are `gpudiag scaling`'s option defaults."""

    model: str = "cnn-small"  # a name in gpudiag.train.specs.MODEL_SPECS
    batch_per_device: int = 32
    steps: int = 100
    warmup_steps: int = 10  # run and timed, left out of the throughput
    profile_steps: int = 5  # traced by the profiler after the warm-up, left out too
    learning_rate: float = 0.05
    momentum: float = 0.9
    ema_decay: float = 0.99  # moving average of the weights; 0: none
    histogram_every: int = 100  # histograms at step 1 and every K steps; 0: none
    variables_on: str = "cpu"  # towers: "cpu" or "device" (the first tower's)
    data: str | None = None  # .npz or TFRecord path; None: the synthetic set
    seed: int = 0


@dataclass(frozen=True)
class TrainingConfig(Plain):
    """One configuration (strategy x device count) for the training probe's child."""

    strategy: str  # one of STRATEGIES
    n_devices: int
    logdir: str  # the configuration's TensorBoard run directory
    workload: Workload = Workload()
    virtual_gpus: int | None = None  # split GPU 0 into this many logical GPUs
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB  # of each logical GPU
    scalars: bool = True  # per-step scalars
    checkpoint: bool = True
    progress: bool = False  # print layout.step_line lines on stdout for the parent

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {self.strategy!r}; one of {STRATEGIES}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingConfig:
        return _build(cls, data, workload=Workload.from_dict)


@dataclass(frozen=True)
class DataInfo(Plain):
    """What the probe trained on."""

    source: str  # "synthetic" or the file path
    kind: str  # "synthetic", "npz" or "tfrecord"
    n_train: int
    n_eval: int
    input_shape: tuple[int, int, int]
    num_classes: int

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "input_shape": list(self.input_shape)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataInfo:
        return _build(cls, data, input_shape=lambda shape: tuple(int(v) for v in shape))


@dataclass(frozen=True)
class TrainResult(Plain):
    """One configuration's training run (gpudiag.train.loop / keras_fit).

    Step lists are 0-based step indices; a loss or accuracy that was not a finite
    number is None."""

    strategy: str
    devices: list[str]
    global_batch: int
    steps: int
    step_s: list[float]  # wall time of every step, warm-up and profiled included
    timed_steps: list[int]  # the steps that count for throughput
    examples_per_s: float | None  # median over timed steps; None if none were timed
    step_s_median: float | None
    losses: list[float | None]
    accuracies: list[float | None]
    tower_losses_last: list[float | None]
    final_loss: float | None  # mean of the last steps
    final_accuracy: float | None
    eval_loss: float | None  # held-out set, raw weights
    eval_accuracy: float | None
    eval_loss_ema: float | None  # held-out set, moving-average weights (None: no EMA)
    eval_accuracy_ema: float | None
    ops_by_device: dict[str, int]  # ops of the traced step per device ({}: not inspected)
    op_devices: dict[str, str]  # node -> assigned device, to attribute the trace's ops
    profile_dir: str | None  # where the profiler trace went (None: no profiler window)
    profiled_steps: list[int] = field(default_factory=list)
    checkpoint_path: str | None = None
    wall_s: float = 0.0
    # seconds per phase of the loop (PHASES_LOOP order); {} in results written before
    phases: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class TrainingResult(Plain):
    """What the training probe's child returns."""

    setup: DeviceSetup
    data: DataInfo
    model: str
    param_count: int
    gradient_bytes: int  # one float32 gradient: what an all-reduce per step moves
    variables_on: str  # "cpu" / "device" (towers) or "mirrored"
    batch_per_device: int
    train: TrainResult

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "setup": self.setup.to_dict(), "data": self.data.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TrainingResult:
        return _build(cls, data, setup=DeviceSetup.from_dict, data=DataInfo.from_dict,
                      train=TrainResult.from_dict)


# ---------------------------------------------------------------------- all-reduce


@dataclass(frozen=True)
class AllreduceConfig(Plain):
    """The collective bandwidth probe's input."""

    sizes_bytes: list[int] = field(default_factory=lambda: list(DEFAULT_SIZES_BYTES))
    n_devices: int | None = None  # None: every GPU, the split, or the default virtual CPUs
    virtual_gpus: int | None = None
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB
    max_virtual_cpu_devices: int = MAX_VIRTUAL_CPU_DEVICES
    min_iters: int = 2  # timed calls per size, at least ...
    max_iters: int = 20  # ... and at most
    max_s_per_size: float = 1.0  # stop timing a size after this long (once min_iters ran)
    # the sweep stops once bandwidth has plateaued: this many sizes in a row none more
    # than plateau_gain above the best bus bandwidth so far (0: every size)
    plateau_sizes: int = 2
    plateau_gain: float = 0.10


@dataclass(frozen=True)
class AllreduceRow(Plain):
    """One message size, with nccl-tests' definitions."""

    size_bytes: int
    iters: int
    time_s: float  # median wall time of one all-reduce
    algbw_bytes_per_s: float  # size / time
    busbw_bytes_per_s: float  # algbw x 2(n-1)/n


@dataclass(frozen=True)
class AllreduceResult(Plain):
    """What the collective bandwidth probe's child returns (no rows with one device)."""

    setup: DeviceSetup
    n_devices: int
    cross_device_ops: str  # the tf.distribute cross-device ops class used
    rows: list[AllreduceRow]
    # the sweep stopped here, bandwidth having plateaued (None: every size asked for ran)
    plateau_after_bytes: int | None = None

    @property
    def peak_busbw_bytes_per_s(self) -> float | None:
        return max((r.busbw_bytes_per_s for r in self.rows), default=None)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "setup": self.setup.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AllreduceResult:
        def rows(values: Sequence[Mapping[str, Any]]) -> list[AllreduceRow]:
            return [AllreduceRow.from_dict(r) for r in values]

        return _build(cls, data, setup=DeviceSetup.from_dict, rows=rows)


# ------------------------------------------------------- one child per device count


@dataclass(frozen=True)
class CountConfig(Plain):
    """`gpudiag scaling`'s child for one device count: every strategy, one after the other,
    on the same devices (TensorFlow's device configuration is per process), then the
    all-reduce sweep when ``allreduce`` is set (the largest count's child)."""

    n_devices: int
    strategies: list[str]
    logdirs: list[str]  # each strategy's TensorBoard run directory, in order
    workload: Workload = Workload()
    virtual_gpus: int | None = None
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB
    # the first child resolves and checks the largest count before any training: the
    # count asked for (--max-gpus), None for every GPU / the default; check_max False: no
    check_max: bool = False
    max_devices: int | None = None
    max_virtual_cpu_devices: int = MAX_VIRTUAL_CPU_DEVICES
    allreduce: AllreduceConfig | None = None

    def training_config(self, index: int) -> TrainingConfig:
        return TrainingConfig(strategy=self.strategies[index], n_devices=self.n_devices,
                              logdir=self.logdirs[index], workload=self.workload,
                              virtual_gpus=self.virtual_gpus,
                              memory_limit_mb=self.memory_limit_mb, progress=True)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CountConfig:
        return _build(cls, data, workload=Workload.from_dict,
                      allreduce=lambda a: None if a is None else AllreduceConfig.from_dict(a))


@dataclass(frozen=True)
class StrategyOutcome(Plain):
    """One strategy's run inside a count child: its result, or the error it raised."""

    strategy: str
    result: TrainingResult | None
    error_type: str | None = None
    error: str | None = None
    build_s: float = 0.0  # data set, trainer (variables, optimizer) before the loop

    def to_dict(self) -> dict[str, Any]:
        return {"strategy": self.strategy,
                "result": None if self.result is None else self.result.to_dict(),
                "error_type": self.error_type, "error": self.error, "build_s": self.build_s}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> StrategyOutcome:
        return _build(cls, data, result=lambda r: None if r is None
                      else TrainingResult.from_dict(r))


@dataclass(frozen=True)
class CountResult(Plain):
    """What a count child returns. ``entered_at``/``tf_imported_at``: wall-clock epochs
    (time.time) the parent subtracts its own start time from; the rest seconds."""

    setup: DeviceSetup
    max_devices: int | None  # resolved by the first child (check_max), else None
    outcomes: list[StrategyOutcome]
    allreduce: AllreduceResult | None
    allreduce_error: str | None  # the sweep raised: "<type>: <first line>"
    entered_at: float
    tf_imported_at: float
    device_setup_s: float
    data_load_s: float
    allreduce_s: float

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "setup": self.setup.to_dict(),
                "outcomes": [o.to_dict() for o in self.outcomes],
                "allreduce": None if self.allreduce is None else self.allreduce.to_dict()}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> CountResult:
        return _build(cls, data, setup=DeviceSetup.from_dict,
                      outcomes=lambda v: [StrategyOutcome.from_dict(o) for o in v],
                      allreduce=lambda a: None if a is None else AllreduceResult.from_dict(a))
