"""What the env and placement probes return: typed records, TF-free.

A probe builds its record inside the child and returns ``record.to_dict()`` (the child
protocol carries JSON, gpudiag/child.py); the parent turns result.json back into the
record with ``from_dict`` and hands it to the verdicts (gpudiag.verdicts.env,
gpudiag.verdicts.placement). Device names are in devnames' short form
(``/device:GPU:1``). The scaling probes' records live with the training code.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

# ---------------------------------------------------------------- env


@dataclass(frozen=True)
class EnvResult:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> EnvResult:
        return cls(
            tf_version=d["tf_version"], keras_version=d.get("keras_version"),
            build_info=dict(d["build_info"]), is_built_with_cuda=bool(d["is_built_with_cuda"]),
            is_built_with_gpu_support=bool(d["is_built_with_gpu_support"]),
            physical_devices=list(d["physical_devices"]), physical_gpus=list(d["physical_gpus"]),
            logical_devices=list(d["logical_devices"]),
            soft_device_placement=bool(d["soft_device_placement"]), env=dict(d["env"]),
        )


# ---------------------------------------------------------------- placement


@dataclass(frozen=True)
class Workload:
    """Where unpinned work ended up: an eager op's result, a tf.function's result."""

    eager_result_device: str
    function_result_device: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Workload:
        return cls(d["eager_result_device"], d["function_result_device"])


@dataclass(frozen=True)
class Pin:
    """One op pinned with ``tf.device``: the device asked for, the device it reported."""

    requested: str
    actual: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Pin:
        return cls(d["requested"], d["actual"])


@dataclass(frozen=True)
class PinnedResult:
    """One matmul pinned to each device, eagerly and as node ``pinned_<i>`` of a graph."""

    targets: list[str]
    eager: list[Pin]
    graph_nodes: dict[str, str]  # node name -> the device it was pinned to

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> PinnedResult:
        return cls(list(d["targets"]), [Pin.from_dict(p) for p in d["eager"]],
                   dict(d["graph_nodes"]))


@dataclass(frozen=True)
class InvalidPinResult:
    """Soft placement off, a matmul pinned to a device that does not exist."""

    requested: str
    raised: bool
    actual: str | None = None  # where the op ran, when it did not raise
    error_type: str | None = None  # what it raised
    message: str | None = None

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> InvalidPinResult:
        return cls(d["requested"], bool(d["raised"]), d.get("actual"), d.get("error_type"),
                   d.get("message"))


@dataclass(frozen=True)
class SoftPinResult:
    """Soft placement on, the same pin: where the op fell back to."""

    requested: str
    actual: str
    soft_device_placement: bool

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> SoftPinResult:
        return cls(d["requested"], d["actual"], bool(d["soft_device_placement"]))


@dataclass(frozen=True)
class NoKernelPin:
    """An op with no GPU kernel (``op``) pinned to a GPU, and where it ran."""

    op: str
    requested: str
    actual: str

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> NoKernelPin:
        return cls(d["op"], d["requested"], d["actual"])


@dataclass(frozen=True)
class MultitowerResult:
    """One matmul per compute device (``tower_<i>/MatMul``), add_n on the host."""

    towers: list[str]
    host: str
    max_relative_error: float  # of the sum against numpy's, in float64
    value_ok: bool

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> MultitowerResult:
        return cls(list(d["towers"]), d["host"], float(d["max_relative_error"]),
                   bool(d["value_ok"]))


@dataclass(frozen=True)
class PlacementResult:
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

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

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
