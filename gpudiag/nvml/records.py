"""The typed records of gpudiag's NVML access: what a device is, what one poll read, what
a sampler run saw. Plain frozen dataclasses; no pynvml, no TensorFlow, no I/O.

Not available: readings the device cannot give are the sentinel :data:`NOT_AVAILABLE`
(an enum member, so ``x is NOT_AVAILABLE`` narrows types for mypy). In JSON (``to_dict``)
it becomes ``null`` and the field's name is listed in ``unavailable_fields``.

Units are in field names: ``_bytes``, ``_percent``, ``_w`` (watts), ``_c`` (degrees
Celsius), ``_mhz``, ``_kib_per_s``, ``_s`` (seconds), ``_us`` (microseconds).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, fields
from typing import Any, Final, Literal, TypeVar


class _NotAvailable(enum.Enum):
    NOT_AVAILABLE = "n/a"

    def __repr__(self) -> str:
        return "NOT_AVAILABLE"

    def __str__(self) -> str:
        return "n/a"


#: A reading the device (or driver) does not support. Compare with ``is``.
NOT_AVAILABLE: Final = _NotAvailable.NOT_AVAILABLE
NotAvailable = Literal[_NotAvailable.NOT_AVAILABLE]

T = TypeVar("T")


def or_none(value: T | NotAvailable) -> T | None:
    """The value, or None where it is NOT_AVAILABLE (for JSON and arithmetic guards)."""
    return None if value is NOT_AVAILABLE else value


class DeviceError(Exception):
    """An NVML call failed for one device (e.g. "GPU is lost"), or for NVML as a whole.

    ``index`` is the NVML device index, or None when the failing call is not per device.
    """

    def __init__(self, index: int | None, reason: str) -> None:
        where = "NVML" if index is None else f"GPU {index}"
        super().__init__(f"{where}: {reason}")
        self.index = index
        self.reason = reason


@dataclass(frozen=True)
class NvmlUnavailable:
    """NVML cannot be used here; ``reason`` says why in one sentence."""

    reason: str


# --------------------------------------------------------------------------- what a backend gives


@dataclass(frozen=True)
class DeviceInfo:
    """What does not change while a device is watched.

    nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,memory.total,enforced.power.limit
    """

    index: int
    name: str | NotAvailable
    uuid: str | NotAvailable
    pci_bus_id: str | NotAvailable
    memory_total_bytes: int | NotAvailable
    power_limit_w: float | NotAvailable


@dataclass(frozen=True)
class DeviceState:
    """One fast poll of one device.

    nvidia-smi --query-gpu=utilization.gpu,utilization.memory,memory.used,memory.total,
    power.draw,temperature.gpu,clocks.sm,clocks.mem
    """

    util_gpu_percent: float | NotAvailable
    util_memory_percent: float | NotAvailable
    memory_used_bytes: int | NotAvailable
    memory_total_bytes: int | NotAvailable
    power_draw_w: float | NotAvailable
    temperature_c: float | NotAvailable
    sm_clock_mhz: int | NotAvailable
    memory_clock_mhz: int | NotAvailable


@dataclass(frozen=True)
class UtilSample:
    """One of the driver's buffered utilization samples (``nvmlDeviceGetSamples``).

    ``timestamp_us`` is the CPU wall clock (microseconds since the epoch) at which the
    driver took the sample; the value covers the sample period before it.
    """

    timestamp_us: int
    util_percent: float


@dataclass(frozen=True)
class ProcessUsage:
    """A process holding memory on a device. nvidia-smi --query-compute-apps=pid,used_memory

    ``used_memory_bytes`` is NOT_AVAILABLE under Windows WDDM. pids are the host's; in a
    container with its own pid namespace they do not match the pids seen inside it.
    """

    pid: int
    used_memory_bytes: int | NotAvailable


@dataclass(frozen=True)
class PcieThroughput:
    """PCIe traffic over a 20 ms window (``nvmlDeviceGetPcieThroughput``), KiB/s."""

    tx_kib_per_s: int | NotAvailable
    rx_kib_per_s: int | NotAvailable


@dataclass(frozen=True)
class GpmReading:
    """GPM metrics of one device over the period since its previous reading (NVML's
    nvmlGpmMetricsGet between two nvmlGpmSampleGet samples; Hopper and later). Where NVML's
    utilization says a kernel ran, these say how much of the GPU it used.

    DCGM's equivalents: dcgmi dmon -e 1002,1003,1004,1005 (SM active, SM occupancy,
    tensor active, DRAM active).
    """

    sm_util_percent: float | NotAvailable  # NVML_GPM_METRIC_SM_UTIL: SMs busy
    sm_occupancy_percent: float | NotAvailable  # NVML_GPM_METRIC_SM_OCCUPANCY: warps
    tensor_util_percent: float | NotAvailable  # NVML_GPM_METRIC_ANY_TENSOR_UTIL
    dram_bw_util_percent: float | NotAvailable  # NVML_GPM_METRIC_DRAM_BW_UTIL


@dataclass(frozen=True)
class GpmUnavailable:
    """GPM metrics cannot be read from a device; ``reason`` says why in one sentence."""

    reason: str


# --------------------------------------------------------------------------- what a sampler saw


@dataclass(frozen=True)
class Sample:
    """One fast poll of one device: seconds since the sampler started, and the reading."""

    t_s: float
    wall_time_s: float
    index: int
    state: DeviceState


@dataclass(frozen=True)
class TimedUtil:
    """A driver utilization sample placed on the sampler's clock (seconds since start)."""

    t_s: float
    wall_time_s: float
    index: int
    util_percent: float


@dataclass(frozen=True)
class TimedGpm:
    """A GPM reading placed on the sampler's clock: it covers the ``span_s`` seconds before
    ``t_s`` (seconds since start)."""

    t_s: float
    wall_time_s: float
    index: int
    span_s: float
    reading: GpmReading


@dataclass(frozen=True)
class ProcessSeen:
    """A process seen holding memory on a device at least once while sampling."""

    pid: int
    max_used_memory_bytes: int | NotAvailable
    first_seen_s: float
    last_seen_s: float


@dataclass(frozen=True)
class DeviceSummary:
    """What one device did while the sampler watched it.

    Utilization statistics come from the driver's buffered samples when the device gives
    them (``util_source == "driver"``), else from the polls (``"polled"``); ``"none"``
    when neither is available. ``active_s``: seconds with utilization at or above
    ``active_threshold_percent``. ``error`` is set when the device failed (e.g. lost);
    the statistics then cover the time before the failure.
    """

    index: int
    name: str | NotAvailable
    uuid: str | NotAvailable
    pci_bus_id: str | NotAvailable
    memory_total_bytes: int | NotAvailable
    observed_s: float
    poll_count: int
    util_source: Literal["driver", "polled", "none"]
    util_sample_count: int
    util_mean_percent: float | NotAvailable
    util_p50_percent: float | NotAvailable
    util_p95_percent: float | NotAvailable
    util_max_percent: float | NotAvailable
    active_threshold_percent: float
    active_s: float | NotAvailable
    memory_util_mean_percent: float | NotAvailable
    peak_memory_used_bytes: int | NotAvailable
    power_mean_w: float | NotAvailable
    power_max_w: float | NotAvailable
    power_limit_w: float | NotAvailable
    temperature_max_c: float | NotAvailable
    pcie_tx_max_kib_per_s: int | NotAvailable
    pcie_rx_max_kib_per_s: int | NotAvailable
    processes: tuple[ProcessSeen, ...]
    unavailable_fields: tuple[str, ...]
    error: str | None
    # GPM (Hopper and later), time-weighted means over the readings; when the device
    # gives none, ``gpm_unavailable_reason`` says why (not supported, failed, too short)
    gpm_reading_count: int = 0
    sm_util_mean_percent: float | NotAvailable = NOT_AVAILABLE
    sm_occupancy_mean_percent: float | NotAvailable = NOT_AVAILABLE
    tensor_util_mean_percent: float | NotAvailable = NOT_AVAILABLE
    dram_bw_util_mean_percent: float | NotAvailable = NOT_AVAILABLE
    # the 95 % interval of util_p95_percent (nvml.summaries.quantile_ci); None: too few
    # samples for one, the p95 is then a point
    util_p95_ci_percent: tuple[float, float] | None = None
    gpm_unavailable_reason: str | None = None

    @property
    def label(self) -> str:
        """``GPU 1 (NVIDIA A100-SXM4-40GB, 00000000:3B:00.0)`` for messages."""
        parts = [str(p) for p in (self.name, self.pci_bus_id) if p is not NOT_AVAILABLE]
        return f"GPU {self.index}" + (f" ({', '.join(parts)})" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return jsonable(self)


@dataclass(frozen=True)
class SamplerCost:
    """What sampling cost: CPU seconds of the sampler's threads and wall time per poll
    (both measured on the real clocks, whatever clock schedules the sampler).

    ``cpu_fraction`` is cpu_s / duration_s: the share of one core the sampler used.
    """

    polls: int
    slow_polls: int
    cpu_s: float
    duration_s: float
    poll_wall_mean_s: float
    poll_wall_max_s: float

    @property
    def cpu_fraction(self) -> float:
        return self.cpu_s / self.duration_s if self.duration_s > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        return {**jsonable(self), "cpu_fraction": self.cpu_fraction}


@dataclass(frozen=True)
class SamplingResult:
    """Everything one Sampler run saw. ``samples`` and ``util_samples`` are timestamped
    on the sampler's clock (``t_s`` seconds since start) and on the wall clock."""

    backend: str
    interval_s: float
    started_wall_s: float
    duration_s: float
    device_indices: tuple[int, ...]
    samples: tuple[Sample, ...]
    util_samples: tuple[TimedUtil, ...]
    summaries: tuple[DeviceSummary, ...]
    cost: SamplerCost
    sampler_error: str | None
    gpm_samples: tuple[TimedGpm, ...] = ()

    def summary(self, index: int) -> DeviceSummary:
        for s in self.summaries:
            if s.index == index:
                return s
        raise KeyError(f"GPU {index} was not sampled")

    def to_dict(self, *, with_samples: bool = False) -> dict[str, Any]:
        out: dict[str, Any] = {
            "backend": self.backend,
            "interval_s": self.interval_s,
            "started_wall_s": self.started_wall_s,
            "duration_s": self.duration_s,
            "device_indices": list(self.device_indices),
            "summaries": [s.to_dict() for s in self.summaries],
            "cost": self.cost.to_dict(),
            "sampler_error": self.sampler_error,
        }
        if with_samples:
            out["samples"] = [jsonable(s) for s in self.samples]
            out["util_samples"] = [jsonable(s) for s in self.util_samples]
            out["gpm_samples"] = [jsonable(s) for s in self.gpm_samples]
        return out


def jsonable(obj: Any) -> Any:
    """A record (or a list of them) as JSON-able data: NOT_AVAILABLE becomes None."""
    if obj is NOT_AVAILABLE:
        return None
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, list | tuple):
        return [jsonable(v) for v in obj]
    return obj
