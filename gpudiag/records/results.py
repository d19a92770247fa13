"""What the env, placement and memory probes take and return: typed records, TF-free.

The parent sends a config record (PlacementConfig, MemoryConfig; env takes none) as the
child's config.json (gpudiag.procs.runner.run_child calls ``to_dict``); the child reads it back
with ``from_dict``. Each default is defined once, here.

A probe builds its record inside the child and returns ``record.to_dict()`` (the child
protocol carries JSON, gpudiag/procs/child.py); the parent turns result.json back into the
record with ``from_dict`` and hands it to the verdicts (gpudiag.verdicts.env,
.placement, .memory). Device names are in devnames' short form (``/device:GPU:1``).
The scaling probes' records live with the training code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Self

from gpudiag.records.devices import DEFAULT_VIRTUAL_GPU_MEMORY_MB


class Record:
    """Base of the records here: ``to_dict`` for the child, ``from_dict`` for the parent.

    ``from_dict`` as written here suits a record of JSON values (str, numbers, lists and
    dicts of them): keys that are not fields are ignored, a missing field takes its
    default. Records holding other records override it.
    """

    __dataclass_fields__: ClassVar[dict[str, Any]]

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Self:
        return cls(**{k: v for k, v in d.items() if k in cls.__dataclass_fields__})


# ---------------------------------------------------------------- configs

@dataclass(frozen=True)
class PlacementConfig(Record):
    """`gpudiag placement`'s child: the devices to set up (gpudiag.probes.devices.setup)."""

    n_devices: int | None = None  # None: every GPU, or the default virtual CPU devices
    virtual_gpus: int | None = None
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB


@dataclass(frozen=True)
class MemoryConfig(Record):
    """`gpudiag memory`'s child: one mode (probes.memory.MODES) of the allocation pattern."""

    mode: str
    steps: int = 8  # tensors allocated one per step, then released
    step_mb: int = 64  # each step's tensor
    memory_limit_mb: int | None = None  # the limit mode's memory_limit


# ---------------------------------------------------------------- env


@dataclass(frozen=True)
class EnvResult(Record):
    """TensorFlow's view of the machine with its default device setup (probes/env.py)."""

    tf_version: str
    keras_version: str | None
    build_info: dict[str, Any]  # tf.sysconfig.get_build_info(): is_cuda_build, cuda_version ...
    is_built_with_cuda: bool
    is_built_with_gpu_support: bool
    physical_devices: list[dict[str, str]]  # {"name", "device_type"}
    # devices.physical_gpu_details: index, name and tf.config.experimental.get_device_details
    # (device_name, compute_capability) or {"error"} where TensorFlow would not say
    physical_gpus: list[dict[str, Any]]
    logical_devices: list[dict[str, str]]  # {"name", "device_type"}
    soft_device_placement: bool
    env: dict[str, str | None]  # devices.DEVICE_ENV_VARS, set or not
    horovod_version: str | None = None  # the installed distribution's (not imported)


# ---------------------------------------------------------------- placement


@dataclass(frozen=True)
class Workload(Record):
    """Where unpinned work ended up: an eager op's result, a tf.function's result."""

    eager_result_device: str
    function_result_device: str


@dataclass(frozen=True)
class Pin(Record):
    """One op pinned with ``tf.device``: the device asked for, the device it reported."""

    requested: str
    actual: str


@dataclass(frozen=True)
class PinnedResult(Record):
    """One matmul pinned to each device, eagerly and as node ``pinned_<i>`` of a graph."""

    targets: list[str]
    eager: list[Pin]
    graph_nodes: dict[str, str]  # node name -> the device it was pinned to

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PinnedResult:
        return cls(list(d["targets"]), [Pin.from_dict(p) for p in d["eager"]],
                   dict(d["graph_nodes"]))


@dataclass(frozen=True)
class InvalidPinResult(Record):
    """Soft placement off, a matmul pinned to a device that does not exist."""

    requested: str
    raised: bool
    actual: str | None = None  # where the op ran, when it did not raise
    error_type: str | None = None  # what it raised
    message: str | None = None


@dataclass(frozen=True)
class SoftPinResult(Record):
    """Soft placement on, the same pin: where the op fell back to."""

    requested: str
    actual: str
    soft_device_placement: bool


@dataclass(frozen=True)
class NoKernelPin(Record):
    """An op with no GPU kernel (``op``) pinned to a GPU, and where it ran."""

    op: str
    requested: str
    actual: str


@dataclass(frozen=True)
class MultitowerResult(Record):
    """One matmul per compute device (``tower_<i>/MatMul``), add_n on the host."""

    towers: list[str]
    host: str
    max_relative_error: float  # of the sum against numpy's, in float64
    value_ok: bool


@dataclass(frozen=True)
class PlacementResult(Record):
    """Everything the placement probe observed itself (probes/placement.py); the
    placement log it made TensorFlow write is in the child's stderr."""

    setup: dict[str, Any]  # devices.DeviceSetup.to_dict()
    tf_version: str
    workload: Workload
    pinned: PinnedResult
    invalid_soft_off: InvalidPinResult
    soft_on: SoftPinResult
    no_gpu_kernel: NoKernelPin | None  # None: no GPU, not run
    multitower: MultitowerResult

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PlacementResult:
        no_kernel = d.get("no_gpu_kernel")
        return cls(
            setup=dict(d["setup"]), tf_version=d["tf_version"],
            workload=Workload.from_dict(d["workload"]),
            pinned=PinnedResult.from_dict(d["pinned"]),
            invalid_soft_off=InvalidPinResult.from_dict(d["invalid_soft_off"]),
            soft_on=SoftPinResult.from_dict(d["soft_on"]),
            no_gpu_kernel=None if no_kernel is None else NoKernelPin.from_dict(no_kernel),
            multitower=MultitowerResult.from_dict(d["multitower"]),
        )


# ---------------------------------------------------------------- memory


@dataclass(frozen=True)
class MemoryReading(Record):
    """TensorFlow's and NVML's view of memory at one point of the allocation pattern."""

    step: int  # 0 at initialisation, 1..steps while growing, then the release
    phase: str  # "initialised" | "grow" | "released" | "after_past_limit"
    held_mb: int  # what the pattern held at this point
    t_s: float  # seconds since the pattern started
    tf_current_bytes: int  # tf.config.experimental.get_memory_info(device)["current"]
    tf_peak_bytes: int  # ... ["peak"]
    nvml_device_used_bytes: int | None = None  # the device's used memory (NVML)
    nvml_process_used_bytes: int | None = None  # this process's entry, when NVML lists it

    def to_dict(self) -> dict[str, Any]:
        """The NVML fields only where NVML gave them (never on the CPU)."""
        return {k: v for k, v in asdict(self).items()
                if v is not None or not k.startswith("nvml_")}


@dataclass(frozen=True)
class AllocationError(Record):
    """An allocation of the pattern that raised (ResourceExhaustedError), at ``step``."""

    step: int
    error_type: str
    error: str  # the first line of its message


@dataclass(frozen=True)
class AllocationPattern(Record):
    """``steps`` tensors of ``step_mb`` MiB allocated one by one on ``device``, then freed."""

    device: str
    steps: int
    step_mb: int
    readings: list[MemoryReading]
    allocation_error: AllocationError | None = None

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "readings": [r.to_dict() for r in self.readings]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AllocationPattern:
        error = d.get("allocation_error")
        return cls(d["device"], int(d["steps"]), int(d["step_mb"]),
                   [MemoryReading.from_dict(r) for r in d["readings"]],
                   None if error is None else AllocationError.from_dict(error))


@dataclass(frozen=True)
class ConfigAttempt(Record):
    """A device-configuration call after TensorFlow initialised its devices: it must raise."""

    api: str  # the call, as written
    raised: bool
    error_type: str | None = None
    error: str | None = None  # the first line of its message


@dataclass(frozen=True)
class PastLimit(Record):
    """One allocation larger than the memory limit: it must raise inside the child."""

    size_mb: int
    raised: bool
    error_type: str | None = None
    error: str | None = None  # the first line of its message


@dataclass(frozen=True)
class MemoryNvml(Record):
    """NVML's view from inside the memory child: the device behind TensorFlow's GPU:0."""

    available: bool
    reason: str | None = None  # why not available
    index: int | None = None  # the NVML index of GPU:0
    mapping_note: str | None = None  # how GPU:0 was matched to it
    total_bytes: int | None = None
    baseline_device_used_bytes: int | None = None  # used before TensorFlow started


@dataclass(frozen=True)
class MemoryResult(Record):
    """One memory mode in one child (probes/memory.py); fields a mode does not fill are
    None (``pattern`` in modify_after_init, ``attempts`` in the others, the limit's
    fields outside ``limit``)."""

    mode: str  # probes.memory.MODES
    gpu_available: bool
    physical_gpus: list[str]
    env: dict[str, str | None]  # TF_FORCE_GPU_ALLOW_GROWTH (and what was inherited) ...
    nvml: MemoryNvml
    pattern: AllocationPattern | None = None
    attempts: list[ConfigAttempt] | None = None  # modify_after_init
    memory_growth: bool | None = None  # tf.config.experimental.get_memory_growth(GPU:0)
    memory_limit_mb: int | None = None
    past_limit: PastLimit | None = None
    alive_after: bool | None = None  # an op still ran after it
    after_past_limit: MemoryReading | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.pattern is not None:
            d["pattern"] = self.pattern.to_dict()
        if self.after_past_limit is not None:
            d["after_past_limit"] = self.after_past_limit.to_dict()
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MemoryResult:
        pattern, attempts = d.get("pattern"), d.get("attempts")
        past, after = d.get("past_limit"), d.get("after_past_limit")
        return cls(
            mode=d["mode"], gpu_available=bool(d["gpu_available"]),
            physical_gpus=list(d["physical_gpus"]), env=dict(d["env"]),
            nvml=MemoryNvml.from_dict(d["nvml"]),
            pattern=None if pattern is None else AllocationPattern.from_dict(pattern),
            attempts=None if attempts is None else [ConfigAttempt.from_dict(a) for a in attempts],
            memory_growth=d.get("memory_growth"), memory_limit_mb=d.get("memory_limit_mb"),
            past_limit=None if past is None else PastLimit.from_dict(past),
            alive_after=d.get("alive_after"),
            after_past_limit=None if after is None else MemoryReading.from_dict(after),
        )
