"""NVML access for gpudiag: the only package that imports pynvml (nvidia-ml-py), and only
when a backend is opened; it imports no TensorFlow, ever, so ``gpudiag monitor`` starts at
once and works on a machine set up for another framework.

Modules (each one concern; see docs/nvml.md):

* ``records``   typed records with units in field names, NOT_AVAILABLE, DeviceError;
* ``backend``   the NvmlBackend protocol, query(), PynvmlBackend, open_backend(), and
                opened(), the context manager through which every command gets NVML;
* ``gpm``       GPM metrics through pynvml (SM utilization, occupancy; Hopper and later);
* ``sampler``   the two-thread Sampler, with an injectable Clock;
* ``summaries`` pure per-device summaries (percentiles, seconds active);
* ``mapping``   pure: CUDA_VISIBLE_DEVICES, PCI bus ids, logical GPU -> NVML device;
* ``lookup``    which NVML device is TensorFlow's GPU:0 (asks a backend);
* ``tbexport``  the samples as TensorBoard scalars.

The names below are re-exported so ``from gpudiag import nvml; nvml.Sampler`` works.
"""

from gpudiag.nvml.backend import NvmlBackend, Opener, PynvmlBackend, open_backend, opened, query
from gpudiag.nvml.lookup import MappedGpu, gpu0_device
from gpudiag.nvml.mapping import (
    LogicalGpu,
    logical_by_physical,
    map_logical_to_physical,
    normalize_pci_bus_id,
    parse_cuda_visible_devices,
    pci_bus_id_from_desc,
)
from gpudiag.nvml.records import (
    NOT_AVAILABLE,
    DeviceError,
    DeviceInfo,
    DeviceState,
    DeviceSummary,
    GpmReading,
    GpmUnavailable,
    NotAvailable,
    NvmlUnavailable,
    PcieThroughput,
    ProcessSeen,
    ProcessUsage,
    Sample,
    SamplerCost,
    SamplingResult,
    TimedGpm,
    TimedUtil,
    UtilSample,
    or_none,
)
from gpudiag.nvml.sampler import (
    DEFAULT_SLOW_INTERVAL_S,
    MIN_INTERVAL_S,
    SYSTEM_CLOCK,
    Clock,
    Sampler,
    SystemClock,
)
from gpudiag.nvml.summaries import (
    DEFAULT_ACTIVE_THRESHOLD_PERCENT,
    DEFAULT_INTERVAL_S,
    DeviceSamples,
    percentile,
    summarise_device,
)
from gpudiag.nvml.tbexport import write_samples, write_scalars

__all__ = [
    "DEFAULT_ACTIVE_THRESHOLD_PERCENT",
    "DEFAULT_INTERVAL_S",
    "DEFAULT_SLOW_INTERVAL_S",
    "MIN_INTERVAL_S",
    "NOT_AVAILABLE",
    "SYSTEM_CLOCK",
    "Clock",
    "DeviceError",
    "DeviceInfo",
    "DeviceSamples",
    "DeviceState",
    "DeviceSummary",
    "GpmReading",
    "GpmUnavailable",
    "LogicalGpu",
    "MappedGpu",
    "NotAvailable",
    "NvmlBackend",
    "NvmlUnavailable",
    "Opener",
    "PcieThroughput",
    "ProcessSeen",
    "ProcessUsage",
    "PynvmlBackend",
    "Sample",
    "Sampler",
    "SamplerCost",
    "SamplingResult",
    "SystemClock",
    "TimedGpm",
    "TimedUtil",
    "UtilSample",
    "gpu0_device",
    "logical_by_physical",
    "map_logical_to_physical",
    "normalize_pci_bus_id",
    "open_backend",
    "opened",
    "or_none",
    "parse_cuda_visible_devices",
    "pci_bus_id_from_desc",
    "percentile",
    "query",
    "summarise_device",
    "write_samples",
    "write_scalars",
]
