"""Which NVML device is TensorFlow's ``/device:GPU:0``: the one lookup `gpudiag memory`
makes in the parent (GPU 0's total memory for ``--fraction``) and its probe makes in each
child (NVML's view of the memory the child holds).

It asks the backend for NVML's device list and maps TensorFlow's first GPU onto it with
:func:`gpudiag.nvml.mapping.map_logical_to_physical` (CUDA_VISIBLE_DEVICES,
CUDA_DEVICE_ORDER: passed in, never read here).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpudiag.nvml.backend import NvmlBackend
from gpudiag.nvml.mapping import LogicalGpu, map_logical_to_physical
from gpudiag.nvml.records import DeviceError, DeviceInfo

GPU0 = "/device:GPU:0"


@dataclass(frozen=True)
class MappedGpu:
    """A TensorFlow GPU's NVML device (``info``) and how it was found (``mapping``)."""

    info: DeviceInfo
    mapping: LogicalGpu


def gpu0_device(
    backend: NvmlBackend, *, cuda_visible_devices: str | None, cuda_device_order: str | None
) -> MappedGpu | str:
    """The NVML device behind TensorFlow's GPU:0, or one sentence saying why it is unknown
    (NVML failed, or CUDA_VISIBLE_DEVICES names no device NVML lists)."""
    try:
        physical = [backend.device_info(i) for i in range(backend.device_count())]
    except DeviceError as exc:
        return f"NVML failed: {exc.reason}"
    mapped = map_logical_to_physical(
        [{"name": GPU0, "physical_index": 0}], cuda_visible_devices, physical,
        cuda_device_order=cuda_device_order,
    )[0]
    by_index = {info.index: info for info in physical}
    if mapped.nvml_index is None or mapped.nvml_index not in by_index:
        return f"cannot tell which NVML device is GPU:0: {mapped.note}"
    return MappedGpu(by_index[mapped.nvml_index], mapped)
