"""NVML access: the only module in gpudiag that imports pynvml (nvidia-ml-py).

It imports no TensorFlow, ever, so ``gpudiag monitor`` starts at once and works on a
machine set up for another framework.

Three parts:

* **A small typed backend** (:class:`NvmlBackend`). :func:`open_backend` returns the real
  one (:class:`PynvmlBackend`) when ``nvmlInit`` succeeds and reports at least one GPU,
  and an :class:`NvmlUnavailable` with the reason otherwise (no library, no driver, no
  GPU). Tests implement the same protocol with scripted scenarios (tests/fake_nvml.py).
  Every pynvml call of the real backend goes through one helper, :func:`query`:

  - a value the device does not support (``NVMLError_NotSupported``, a function the
    driver lacks, no permission) comes back as :data:`NOT_AVAILABLE`, never as an
    exception;
  - any other NVML error (``NVMLError_GpuIsLost`` ...) is raised as :class:`DeviceError`,
    which the sampler turns into an error record for that one device while the others
    keep reporting.

* **A sampler** (:class:`Sampler`): two threads in the *parent* process. The fast one
  polls every device each ``interval_s`` (default 0.5 s, never below 0.1 s: NVML
  computes utilization over a window of 1/6 s to 1 s depending on the GPU, so polling
  faster only takes the driver's lock more often) and, between polls, drains the
  driver's own buffered utilization samples (``nvmlDeviceGetSamples``), so a short run
  still gets fine-grained data. The slow one queries the per-process list and PCIe
  throughput (``nvmlDeviceGetPcieThroughput`` measures over 20 ms per call), so neither
  delays the fast loop. Device handles are cached. The sampler measures its own cost
  (CPU seconds of both threads, wall time per poll): see :class:`SamplerCost` and
  benchmarks/sampler_cost.py.

* **Logical to physical mapping** (:func:`map_logical_to_physical`): which NVML device a
  TensorFlow logical GPU runs on, including N logical GPUs split from one physical GPU.

What NVML's utilization means: ``utilization.gpu`` is the share of the last sample
period during which *at least one kernel* was running on the GPU. It is not how full the
SMs were: a single tiny kernel running back to back reads 100 %. A GPU under the idle
threshold did (almost) no work; a GPU at 100 % may still be badly used.

Not available: readings the device cannot give are the sentinel :data:`NOT_AVAILABLE`
(an enum member, so ``x is NOT_AVAILABLE`` narrows types for mypy). In JSON (``to_dict``)
it becomes ``null`` and the field's name is listed in ``unavailable_fields``.

Units are in field names: ``_bytes``, ``_percent``, ``_w`` (watts), ``_c`` (degrees
Celsius), ``_mhz``, ``_kib_per_s``, ``_s`` (seconds), ``_us`` (microseconds).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import math
import re
import statistics
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Any, Final, Literal, Protocol, TypeVar

MIN_INTERVAL_S: Final = 0.1
DEFAULT_INTERVAL_S: Final = 0.5
DEFAULT_ACTIVE_THRESHOLD_PERCENT: Final = 10.0
#: The slow loop (processes, PCIe) runs at most this often.
DEFAULT_SLOW_INTERVAL_S: Final = 1.0


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


# --------------------------------------------------------------------------- records


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
class NvmlUnavailable:
    """NVML cannot be used here; ``reason`` says why in one sentence."""

    reason: str


# --------------------------------------------------------------------------- backends


class NvmlBackend(Protocol):
    """The small interface everything else in gpudiag uses to reach NVML.

    Device methods take the NVML device index and raise DeviceError when the device
    fails; unsupported readings come back as NOT_AVAILABLE.
    """

    @property
    def description(self) -> str:
        """One line: which backend, bindings and driver version."""
        ...

    def device_count(self) -> int: ...

    def device_info(self, index: int) -> DeviceInfo: ...

    def device_state(self, index: int) -> DeviceState: ...

    def utilization_samples(self, index: int, since_us: int) -> list[UtilSample] | NotAvailable:
        """Driver samples taken after ``since_us`` (wall clock, µs); [] when none are new."""
        ...

    def processes(self, index: int) -> list[ProcessUsage] | NotAvailable: ...

    def pcie_throughput(self, index: int) -> PcieThroughput: ...

    def close(self) -> None: ...


#: NVML error names that mean "this device or driver cannot give that value".
_NOT_AVAILABLE_ERRORS: Final = ("NOT_SUPPORTED", "FUNCTION_NOT_FOUND", "NO_PERMISSION")


def query(
    nv: ModuleType,
    fn: Callable[..., T],
    *args: Any,
    index: int | None,
    empty_on_not_found: bool = False,
) -> T | NotAvailable:
    """Call one pynvml function: the single door every NVML call of gpudiag goes through.

    Unsupported values become NOT_AVAILABLE; other NVML errors become DeviceError for
    ``index``. With ``empty_on_not_found``, NVML_ERROR_NOT_FOUND (what
    nvmlDeviceGetSamples returns when no sample is newer than the timestamp) is an empty
    list.
    """
    try:
        return fn(*args)
    except nv.NVMLError as exc:
        code = getattr(exc, "value", None)
        if code in {getattr(nv, f"NVML_ERROR_{name}") for name in _NOT_AVAILABLE_ERRORS}:
            return NOT_AVAILABLE
        if empty_on_not_found and code == nv.NVML_ERROR_NOT_FOUND:
            return []  # type: ignore[return-value]
        raise DeviceError(index, str(exc)) from exc


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class PynvmlBackend:
    """The real backend: pynvml (nvidia-ml-py) on an initialised NVML."""

    def __init__(self, nv: ModuleType) -> None:
        self._nv = nv
        self._handles: dict[int, Any] = {}
        driver = query(nv, nv.nvmlSystemGetDriverVersion, index=None)
        self._description = f"pynvml (nvidia-ml-py), NVIDIA driver {_text(driver)}"
        self._value_readers = {
            nv.NVML_VALUE_TYPE_DOUBLE: "dVal",
            nv.NVML_VALUE_TYPE_UNSIGNED_INT: "uiVal",
            nv.NVML_VALUE_TYPE_UNSIGNED_LONG: "ulVal",
            nv.NVML_VALUE_TYPE_UNSIGNED_LONG_LONG: "ullVal",
            nv.NVML_VALUE_TYPE_SIGNED_LONG_LONG: "sllVal",
            nv.NVML_VALUE_TYPE_SIGNED_INT: "siVal",
        }

    @property
    def description(self) -> str:
        return self._description

    def _q(self, fn: Callable[..., T], *args: Any, index: int | None) -> T | NotAvailable:
        return query(self._nv, fn, *args, index=index)

    def _handle(self, index: int) -> Any:
        handle = self._handles.get(index)
        if handle is None:
            handle = self._q(self._nv.nvmlDeviceGetHandleByIndex, index, index=index)
            if handle is NOT_AVAILABLE:
                raise DeviceError(index, "no handle for this device index")
            self._handles[index] = handle
        return handle

    def device_count(self) -> int:
        count = self._q(self._nv.nvmlDeviceGetCount, index=None)
        return 0 if count is NOT_AVAILABLE else int(count)

    def device_info(self, index: int) -> DeviceInfo:
        nv, h = self._nv, self._handle(index)
        name = self._q(nv.nvmlDeviceGetName, h, index=index)
        uuid = self._q(nv.nvmlDeviceGetUUID, h, index=index)
        pci = self._q(nv.nvmlDeviceGetPciInfo, h, index=index)
        memory = self._q(nv.nvmlDeviceGetMemoryInfo, h, index=index)
        limit_mw = self._q(nv.nvmlDeviceGetEnforcedPowerLimit, h, index=index)
        return DeviceInfo(
            index=index,
            name=NOT_AVAILABLE if name is NOT_AVAILABLE else _text(name),
            uuid=NOT_AVAILABLE if uuid is NOT_AVAILABLE else _text(uuid),
            pci_bus_id=NOT_AVAILABLE if pci is NOT_AVAILABLE else _text(pci.busId),
            memory_total_bytes=NOT_AVAILABLE if memory is NOT_AVAILABLE else int(memory.total),
            power_limit_w=NOT_AVAILABLE if limit_mw is NOT_AVAILABLE else limit_mw / 1000.0,
        )

    def device_state(self, index: int) -> DeviceState:
        nv, h = self._nv, self._handle(index)
        util = self._q(nv.nvmlDeviceGetUtilizationRates, h, index=index)
        memory = self._q(nv.nvmlDeviceGetMemoryInfo, h, index=index)
        power_mw = self._q(nv.nvmlDeviceGetPowerUsage, h, index=index)
        temp = self._q(nv.nvmlDeviceGetTemperature, h, nv.NVML_TEMPERATURE_GPU, index=index)
        sm = self._q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_SM, index=index)
        mem_clock = self._q(nv.nvmlDeviceGetClockInfo, h, nv.NVML_CLOCK_MEM, index=index)
        return DeviceState(
            util_gpu_percent=NOT_AVAILABLE if util is NOT_AVAILABLE else float(util.gpu),
            util_memory_percent=NOT_AVAILABLE if util is NOT_AVAILABLE else float(util.memory),
            memory_used_bytes=NOT_AVAILABLE if memory is NOT_AVAILABLE else int(memory.used),
            memory_total_bytes=NOT_AVAILABLE if memory is NOT_AVAILABLE else int(memory.total),
            power_draw_w=NOT_AVAILABLE if power_mw is NOT_AVAILABLE else power_mw / 1000.0,
            temperature_c=NOT_AVAILABLE if temp is NOT_AVAILABLE else float(temp),
            sm_clock_mhz=NOT_AVAILABLE if sm is NOT_AVAILABLE else int(sm),
            memory_clock_mhz=NOT_AVAILABLE if mem_clock is NOT_AVAILABLE else int(mem_clock),
        )

    def utilization_samples(self, index: int, since_us: int) -> list[UtilSample] | NotAvailable:
        nv, h = self._nv, self._handle(index)
        got = query(
            nv,
            nv.nvmlDeviceGetSamples,
            h,
            nv.NVML_GPU_UTILIZATION_SAMPLES,
            since_us,
            index=index,
            empty_on_not_found=True,
        )
        if got is NOT_AVAILABLE:
            return NOT_AVAILABLE
        if isinstance(got, list):  # NOT_FOUND: nothing newer than since_us
            return []
        value_type, raw = got
        reader = self._value_readers.get(value_type, "uiVal")
        return [
            UtilSample(int(s.timeStamp), float(getattr(s.sampleValue, reader)))
            for s in raw
            if int(s.timeStamp) > since_us
        ]

    def processes(self, index: int) -> list[ProcessUsage] | NotAvailable:
        nv, h = self._nv, self._handle(index)
        procs = self._q(nv.nvmlDeviceGetComputeRunningProcesses, h, index=index)
        if procs is NOT_AVAILABLE:
            return NOT_AVAILABLE
        return [
            ProcessUsage(
                pid=int(p.pid),
                used_memory_bytes=(
                    NOT_AVAILABLE if p.usedGpuMemory is None else int(p.usedGpuMemory)
                ),
            )
            for p in procs
        ]

    def pcie_throughput(self, index: int) -> PcieThroughput:
        nv, h = self._nv, self._handle(index)
        tx = self._q(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_TX_BYTES, index=index)
        rx = self._q(nv.nvmlDeviceGetPcieThroughput, h, nv.NVML_PCIE_UTIL_RX_BYTES, index=index)
        return PcieThroughput(
            tx_kib_per_s=NOT_AVAILABLE if tx is NOT_AVAILABLE else int(tx),
            rx_kib_per_s=NOT_AVAILABLE if rx is NOT_AVAILABLE else int(rx),
        )

    def close(self) -> None:
        self._handles.clear()
        with contextlib.suppress(self._nv.NVMLError):  # a half-broken NVML: nothing to release
            self._nv.nvmlShutdown()


_INIT_HINTS: Final = {
    "LIBRARY_NOT_FOUND": "libnvidia-ml.so.1 was not found: no NVIDIA driver is installed here",
    "DRIVER_NOT_LOADED": "the NVIDIA kernel driver is not loaded",
    "NO_PERMISSION": "no permission to open the NVIDIA device files",
    "LIB_RM_VERSION_MISMATCH": (
        "the NVML library and the loaded kernel driver differ in version "
        "(reboot or reload the driver after an upgrade)"
    ),
}


def open_backend() -> PynvmlBackend | NvmlUnavailable:
    """The real backend when NVML initialises and sees a GPU; otherwise why not."""
    try:
        import pynvml  # the one import of pynvml in gpudiag
    except ImportError as exc:
        return NvmlUnavailable(
            f"the NVML bindings are not installed ({exc}); pip install nvidia-ml-py"
        )
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        hint = next(
            (
                text
                for name, text in _INIT_HINTS.items()
                if getattr(exc, "value", None) == getattr(pynvml, f"NVML_ERROR_{name}", None)
            ),
            None,
        )
        detail = f"{hint} ({exc})" if hint else str(exc)
        return NvmlUnavailable(f"NVML did not initialise: {detail}")
    try:
        backend = PynvmlBackend(pynvml)
        count = backend.device_count()
    except DeviceError as exc:
        pynvml.nvmlShutdown()
        return NvmlUnavailable(f"NVML initialised but failed at once: {exc.reason}")
    if count == 0:
        backend.close()
        return NvmlUnavailable("NVML initialised but reports no GPU")
    return backend


# --------------------------------------------------------------------------- sampling


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

    @property
    def label(self) -> str:
        """``GPU 1 (NVIDIA A100-SXM4-40GB, 00000000:3B:00.0)`` for messages."""
        parts = [str(p) for p in (self.name, self.pci_bus_id) if p is not NOT_AVAILABLE]
        return f"GPU {self.index}" + (f" ({', '.join(parts)})" if parts else "")

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(self)


@dataclass(frozen=True)
class SamplerCost:
    """What sampling cost: CPU seconds of the sampler's threads and wall time per poll.

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
        return {**_jsonable(self), "cpu_fraction": self.cpu_fraction}


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
            out["samples"] = [_jsonable(s) for s in self.samples]
            out["util_samples"] = [_jsonable(s) for s in self.util_samples]
        return out


def _jsonable(obj: Any) -> Any:
    if obj is NOT_AVAILABLE:
        return None
    if hasattr(obj, "__dataclass_fields__"):
        return {f.name: _jsonable(getattr(obj, f.name)) for f in fields(obj)}
    if isinstance(obj, list | tuple):
        return [_jsonable(v) for v in obj]
    return obj


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (0 <= q <= 100) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def _durations(times_s: Sequence[float], fallback_s: float) -> list[float]:
    """How long each point of a series stands for: the gap since the previous point
    (a reading covers the period before it); the first point gets the typical gap."""
    if not times_s:
        return []
    gaps = [b - a for a, b in itertools.pairwise(times_s)]
    typical = statistics.median(gaps) if gaps else fallback_s
    first = min(typical, max(times_s[0], 0.0))
    return [first, *gaps]


def _values(items: Iterable[T | NotAvailable]) -> list[T]:
    return [v for v in items if v is not NOT_AVAILABLE]


def summarise_device(
    info: DeviceInfo,
    samples: Sequence[Sample],
    util_samples: Sequence[TimedUtil],
    *,
    processes: Sequence[ProcessSeen] = (),
    pcie: Sequence[PcieThroughput] = (),
    error: str | None = None,
    observed_s: float,
    interval_s: float = DEFAULT_INTERVAL_S,
    active_threshold_percent: float = DEFAULT_ACTIVE_THRESHOLD_PERCENT,
) -> DeviceSummary:
    """Pure: summarise one device's samples (all of them for ``info.index``)."""
    states = [s.state for s in samples]
    polled_util = [
        (s.t_s, s.state.util_gpu_percent)
        for s in samples
        if s.state.util_gpu_percent is not NOT_AVAILABLE
    ]
    util_source: Literal["driver", "polled", "none"]
    series: list[tuple[float, float]]
    if util_samples:
        util_source = "driver"
        series = sorted((u.t_s, u.util_percent) for u in util_samples)
        fallback = 1.0 / 6.0
    elif polled_util:
        util_source = "polled"
        series = [(t, float(u)) for t, u in polled_util]
        fallback = interval_s
    else:
        util_source, series, fallback = "none", [], interval_s

    unavailable: list[str] = []
    for name in (f.name for f in fields(DeviceState)):
        if states and all(getattr(s, name) is NOT_AVAILABLE for s in states):
            unavailable.append(name)
    for name in ("name", "uuid", "pci_bus_id", "memory_total_bytes", "power_limit_w"):
        if getattr(info, name) is NOT_AVAILABLE:
            unavailable.append(name)
    if samples and not util_samples:
        unavailable.append("utilization_samples")
    if pcie and all(p.tx_kib_per_s is NOT_AVAILABLE for p in pcie):
        unavailable.append("pcie_throughput")

    util_mean: float | NotAvailable = NOT_AVAILABLE
    util_p50: float | NotAvailable = NOT_AVAILABLE
    util_p95: float | NotAvailable = NOT_AVAILABLE
    util_max: float | NotAvailable = NOT_AVAILABLE
    active: float | NotAvailable = NOT_AVAILABLE
    if series:
        values = sorted(u for _, u in series)
        util_mean = statistics.fmean(values)
        util_p50 = percentile(values, 50)
        util_p95 = percentile(values, 95)
        util_max = values[-1]
        durations = _durations([t for t, _ in series], fallback)
        active = sum(
            d for d, (_, u) in zip(durations, series, strict=True) if u >= active_threshold_percent
        )

    mem_used = _values(s.memory_used_bytes for s in states)
    mem_util = _values(s.util_memory_percent for s in states)
    power = _values(s.power_draw_w for s in states)
    temps = _values(s.temperature_c for s in states)
    tx = _values(p.tx_kib_per_s for p in pcie)
    rx = _values(p.rx_kib_per_s for p in pcie)
    total = info.memory_total_bytes
    if total is NOT_AVAILABLE:
        totals = _values(s.memory_total_bytes for s in states)
        total = totals[0] if totals else NOT_AVAILABLE
    return DeviceSummary(
        index=info.index,
        name=info.name,
        uuid=info.uuid,
        pci_bus_id=info.pci_bus_id,
        memory_total_bytes=total,
        observed_s=observed_s,
        poll_count=len(samples),
        util_source=util_source,
        util_sample_count=len(series),
        util_mean_percent=util_mean,
        util_p50_percent=util_p50,
        util_p95_percent=util_p95,
        util_max_percent=util_max,
        active_threshold_percent=active_threshold_percent,
        active_s=active,
        memory_util_mean_percent=statistics.fmean(mem_util) if mem_util else NOT_AVAILABLE,
        peak_memory_used_bytes=max(mem_used) if mem_used else NOT_AVAILABLE,
        power_mean_w=statistics.fmean(power) if power else NOT_AVAILABLE,
        power_max_w=max(power) if power else NOT_AVAILABLE,
        power_limit_w=info.power_limit_w,
        temperature_max_c=max(temps) if temps else NOT_AVAILABLE,
        pcie_tx_max_kib_per_s=max(tx) if tx else NOT_AVAILABLE,
        pcie_rx_max_kib_per_s=max(rx) if rx else NOT_AVAILABLE,
        processes=tuple(sorted(processes, key=lambda p: p.pid)),
        unavailable_fields=tuple(unavailable),
        error=error,
    )


def _unknown_info(index: int) -> DeviceInfo:
    na = NOT_AVAILABLE
    return DeviceInfo(index, na, na, na, na, na)


class Sampler:
    """Samples NVML devices from a thread in this (the parent) process.

    ``Sampler(backend, interval_s=0.5, device_indices=None)``; ``start()`` before the
    workload starts, ``stop()`` after it ends (returns a SamplingResult); or use it as a
    context manager (``result`` holds the SamplingResult after the block). A device that
    fails (DeviceError) stops being polled and gets ``error`` in its summary; the others
    keep reporting.
    """

    def __init__(
        self,
        backend: NvmlBackend,
        interval_s: float = DEFAULT_INTERVAL_S,
        device_indices: Sequence[int] | None = None,
        *,
        active_threshold_percent: float = DEFAULT_ACTIVE_THRESHOLD_PERCENT,
        slow_interval_s: float | None = None,
    ) -> None:
        if not interval_s >= MIN_INTERVAL_S:  # also rejects NaN
            raise ValueError(
                f"interval_s must be at least {MIN_INTERVAL_S} s (NVML's utilization window "
                f"is 1/6 s to 1 s; polling faster only holds the driver's lock), got {interval_s}"
            )
        self._backend = backend
        self.interval_s = float(interval_s)
        self.slow_interval_s = max(
            slow_interval_s if slow_interval_s is not None else DEFAULT_SLOW_INTERVAL_S,
            2 * self.interval_s,
        )
        self.active_threshold_percent = active_threshold_percent
        self._requested = None if device_indices is None else tuple(device_indices)
        self._indices: tuple[int, ...] = ()
        self._infos: dict[int, DeviceInfo] = {}
        self._errors: dict[int, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._samples: list[Sample] = []
        self._utils: list[TimedUtil] = []
        self._procs: dict[int, dict[int, ProcessSeen]] = {}
        self._pcie: dict[int, list[PcieThroughput]] = {}
        self._since_us: dict[int, int] = {}
        self._poll_walls: list[float] = []
        self._slow_polls = 0
        self._cpu_s = 0.0
        self._thread_error: str | None = None
        self._t0 = 0.0
        self._wall0 = 0.0
        self._started = False
        self.result: SamplingResult | None = None

    @property
    def device_indices(self) -> tuple[int, ...]:
        """The NVML indices being sampled (known once started)."""
        return self._indices

    # -- lifecycle

    def start(self) -> Sampler:
        if self._started:
            raise RuntimeError("a Sampler can be started once")
        self._started = True
        count = self._backend.device_count()
        if self._requested is None:
            self._indices = tuple(range(count))
        else:
            bad = [i for i in self._requested if not 0 <= i < count]
            if bad:
                raise ValueError(f"no GPU {bad[0]}: NVML sees {count} (indices 0..{count - 1})")
            self._indices = tuple(dict.fromkeys(self._requested))
        self._t0 = time.monotonic()
        self._wall0 = time.time()
        for i in self._indices:
            try:
                self._infos[i] = self._backend.device_info(i)
            except DeviceError as exc:
                self._infos[i] = _unknown_info(i)
                self._errors[i] = f"{exc.reason} (at start)"
            self._since_us[i] = int(self._wall0 * 1e6)
            self._procs[i] = {}
            self._pcie[i] = []
        self._threads = [
            threading.Thread(target=self._run, args=(self._fast_loop,), name="gpudiag-nvml-fast"),
            threading.Thread(target=self._run, args=(self._slow_loop,), name="gpudiag-nvml-slow"),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()
        return self

    def stop(self) -> SamplingResult:
        """Stop both threads, take a last poll (drains the driver's buffer), summarise."""
        if self.result is not None:
            return self.result
        if not self._started:
            raise RuntimeError("Sampler.stop() before start()")
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._run(self._poll_all)  # last poll: drains the driver samples since the previous one
        duration = time.monotonic() - self._t0
        self.result = self._summarise(duration)
        return self.result

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # -- threads

    def _run(self, loop: Callable[[], None]) -> None:
        cpu0 = time.thread_time()
        try:
            loop()
        except Exception as exc:  # thread boundary: surfaced as SamplingResult.sampler_error
            with self._lock:
                if self._thread_error is None:
                    self._thread_error = f"{threading.current_thread().name}: {exc!r}"
        finally:
            with self._lock:
                self._cpu_s += time.thread_time() - cpu0

    def _fast_loop(self) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            self._poll_all()
            next_t += self.interval_s
            delay = next_t - time.monotonic()
            if delay < 0:  # fell behind (a slow driver): do not burst to catch up
                next_t, delay = time.monotonic(), 0.0
            self._stop.wait(delay)

    def _slow_loop(self) -> None:
        # First slow poll one fast interval in: the workload has usually started by then.
        wait_s = self.interval_s
        while not self._stop.wait(wait_s):
            self._slow_poll()
            wait_s = self.slow_interval_s

    def _alive(self) -> list[int]:
        with self._lock:
            return [i for i in self._indices if i not in self._errors]

    def _fail(self, index: int, exc: DeviceError) -> None:
        with self._lock:
            if index not in self._errors:
                t = time.monotonic() - self._t0
                self._errors[index] = f"{exc.reason} (at {t:.1f} s)"

    def _poll_all(self) -> None:
        begin = time.monotonic()
        for i in self._alive():
            try:
                state = self._backend.device_state(i)
                fine = self._backend.utilization_samples(i, self._since_us[i])
            except DeviceError as exc:
                self._fail(i, exc)
                continue
            now = time.monotonic()
            t, wall = now - self._t0, self._wall0 + (now - self._t0)
            self._samples.append(Sample(t, wall, i, state))
            if fine is not NOT_AVAILABLE and fine:
                self._since_us[i] = max(u.timestamp_us for u in fine)
                self._utils.extend(
                    TimedUtil(
                        u.timestamp_us / 1e6 - self._wall0, u.timestamp_us / 1e6, i, u.util_percent
                    )
                    for u in fine
                )
        self._poll_walls.append(time.monotonic() - begin)

    def _slow_poll(self) -> None:
        self._slow_polls += 1
        for i in self._alive():
            try:
                procs = self._backend.processes(i)
                pcie = self._backend.pcie_throughput(i)
            except DeviceError as exc:
                self._fail(i, exc)
                continue
            t = time.monotonic() - self._t0
            self._pcie[i].append(pcie)
            if procs is NOT_AVAILABLE:
                continue
            seen = self._procs[i]
            for p in procs:
                old = seen.get(p.pid)
                used = p.used_memory_bytes
                if old is not None:
                    prev = old.max_used_memory_bytes
                    if prev is not NOT_AVAILABLE and (used is NOT_AVAILABLE or prev > used):
                        used = prev
                seen[p.pid] = ProcessSeen(p.pid, used, old.first_seen_s if old else t, t)

    def _summarise(self, duration_s: float) -> SamplingResult:
        summaries = []
        for i in self._indices:
            samples = [s for s in self._samples if s.index == i]
            error = self._errors.get(i)
            observed = samples[-1].t_s if (error and samples) else (0.0 if error else duration_s)
            summaries.append(
                summarise_device(
                    self._infos[i],
                    samples,
                    [u for u in self._utils if u.index == i],
                    processes=list(self._procs[i].values()),
                    pcie=self._pcie[i],
                    error=error,
                    observed_s=observed,
                    interval_s=self.interval_s,
                    active_threshold_percent=self.active_threshold_percent,
                )
            )
        walls = self._poll_walls or [0.0]
        return SamplingResult(
            backend=self._backend.description,
            interval_s=self.interval_s,
            started_wall_s=self._wall0,
            duration_s=duration_s,
            device_indices=self._indices,
            samples=tuple(self._samples),
            util_samples=tuple(sorted(self._utils, key=lambda u: (u.index, u.t_s))),
            summaries=tuple(summaries),
            cost=SamplerCost(
                polls=len(self._poll_walls),
                slow_polls=self._slow_polls,
                cpu_s=self._cpu_s,
                duration_s=duration_s,
                poll_wall_mean_s=statistics.fmean(walls),
                poll_wall_max_s=max(walls),
            ),
            sampler_error=self._thread_error,
        )


# --------------------------------------------------------------------------- TensorBoard

#: Scalar tags written per device under the run directory's ``nvml/`` TensorBoard run.
#: Step is milliseconds since the sampler started; wall time is the sample's.
TAG_UTIL = "gpu{index}/util_percent"
TAG_UTIL_FINE = "gpu{index}/util_driver_percent"
TAG_MEMORY_USED = "gpu{index}/memory_used_mib"
TAG_POWER = "gpu{index}/power_w"


def write_scalars(result: SamplingResult, tb_dir: Path) -> list[str]:
    """Write per-GPU utilization, memory and power as TensorBoard scalars into ``tb_dir``.

    Uses gpudiag.tb's event writer (tensorboard's protos, no TensorFlow). Returns the
    tags written.
    """
    from gpudiag.tb import EventWriter

    tags: set[str] = set()
    with EventWriter(tb_dir) as writer:

        def add(tag: str, value: float, t_s: float, wall: float) -> None:
            writer.scalar(tag, value, round(t_s * 1000), wall_time=wall)
            tags.add(tag)

        for s in result.samples:
            st = s.state
            if st.util_gpu_percent is not NOT_AVAILABLE:
                add(TAG_UTIL.format(index=s.index), st.util_gpu_percent, s.t_s, s.wall_time_s)
            if st.memory_used_bytes is not NOT_AVAILABLE:
                add(
                    TAG_MEMORY_USED.format(index=s.index),
                    st.memory_used_bytes / 2**20,
                    s.t_s,
                    s.wall_time_s,
                )
            if st.power_draw_w is not NOT_AVAILABLE:
                add(TAG_POWER.format(index=s.index), st.power_draw_w, s.t_s, s.wall_time_s)
        for u in result.util_samples:
            add(TAG_UTIL_FINE.format(index=u.index), u.util_percent, u.t_s, u.wall_time_s)
    return sorted(tags)


# --------------------------------------------------------------------------- mapping

_PCI_RE: Final = re.compile(
    r"^(?:(?P<domain>[0-9a-fA-F]{1,8}):)?(?P<bus>[0-9a-fA-F]{1,2}):"
    r"(?P<device>[0-9a-fA-F]{1,2})\.(?P<function>[0-7])$"
)
_DESC_PCI_RE: Final = re.compile(r"pci bus id:\s*([0-9a-fA-F:.]+)")


def normalize_pci_bus_id(bus_id: str) -> str | None:
    """``0000:3b:00.0`` (TensorFlow) and ``00000000:3B:00.0`` (NVML) -> ``0000:3b:00.0``."""
    m = _PCI_RE.match(bus_id.strip())
    if m is None:
        return None
    domain = int(m["domain"] or "0", 16)
    return f"{domain:04x}:{int(m['bus'], 16):02x}:{int(m['device'], 16):02x}.{m['function']}"


def pci_bus_id_from_desc(physical_device_desc: str) -> str | None:
    """The PCI bus id in TensorFlow's ``physical_device_desc``
    ("device: 0, name: NVIDIA A100, pci bus id: 0000:3b:00.0, compute capability: 8.0")."""
    m = _DESC_PCI_RE.search(physical_device_desc)
    return m.group(1) if m else None


@dataclass(frozen=True)
class LogicalGpu:
    """Where one TensorFlow logical GPU runs, in NVML's numbering.

    ``nvml_index`` is None when it could not be resolved (``note`` says why).
    ``method``: ``pci_bus_id`` (exact), ``cuda_visible_devices`` or ``ordinal`` (by order;
    exact only when CUDA_DEVICE_ORDER=PCI_BUS_ID, which is NVML's order).
    """

    logical_name: str
    tf_physical_index: int
    nvml_index: int | None
    pci_bus_id: str | None
    method: Literal["pci_bus_id", "cuda_visible_devices", "ordinal", "unresolved"]
    note: str | None = None


def parse_cuda_visible_devices(value: str | None) -> list[str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None when unset (all devices); the entries
    up to the first invalid one otherwise (CUDA ignores everything after it)."""
    if value is None:
        return None
    out: list[str] = []
    for raw in value.split(","):
        token = raw.strip()
        if not token:
            break
        if token.lstrip("-").isdigit():
            if int(token) < 0:
                break
            out.append(str(int(token)))
        elif token.startswith(("GPU-", "MIG-")):
            out.append(token)
        else:
            break
    return out


def _resolve_token(token: str, physical: Sequence[DeviceInfo]) -> tuple[int | None, str | None]:
    if token.isdigit():
        idx = int(token)
        if any(p.index == idx for p in physical):
            return idx, None
        return None, f"CUDA_VISIBLE_DEVICES names GPU {idx}, which NVML does not list"
    if token.startswith("GPU-"):
        matches = [
            p.index
            for p in physical
            if p.uuid is not NOT_AVAILABLE and str(p.uuid).startswith(token)
        ]
        if len(matches) == 1:
            return matches[0], None
        return None, f"CUDA_VISIBLE_DEVICES entry {token} matches {len(matches)} NVML devices"
    return None, f"CUDA_VISIBLE_DEVICES entry {token} is a MIG instance; not mapped"


def map_logical_to_physical(
    logical_details: list[dict[str, Any]],
    cuda_visible_devices: str | None,
    physical: list[DeviceInfo],
    *,
    cuda_device_order: str | None = None,
) -> list[LogicalGpu]:
    """Map TensorFlow's logical GPUs onto NVML devices.

    ``logical_details``: one dict per logical GPU, in TensorFlow's order, with keys
    ``name`` (``/device:GPU:0``), ``physical_index`` (TensorFlow's physical GPU it was
    made from: several logical GPUs split from one physical GPU share it) and, where
    known, ``pci_bus_id`` (from ``physical_device_desc``; ``get_device_details`` gives
    only ``device_name`` and ``compute_capability`` in TF 2.21) and ``device_name``.
    ``physical``: NVML's devices (DeviceInfo from the backend).

    A PCI bus id match is exact. Otherwise TensorFlow's physical GPU k is the k-th entry
    of CUDA_VISIBLE_DEVICES (an index or a GPU-uuid prefix), or CUDA ordinal k when it is
    unset; NVML numbers devices by PCI bus id, so an ordinal is exact only with
    CUDA_DEVICE_ORDER=PCI_BUS_ID (CUDA's default order puts the fastest GPU first).
    """
    by_pci = {
        normalize_pci_bus_id(str(p.pci_bus_id)): p.index
        for p in physical
        if p.pci_bus_id is not NOT_AVAILABLE
    }
    visible = parse_cuda_visible_devices(cuda_visible_devices)
    order_note = (
        None
        if (cuda_device_order or "").upper() == "PCI_BUS_ID"
        else "by CUDA order; exact only with CUDA_DEVICE_ORDER=PCI_BUS_ID or identical GPUs"
    )
    out: list[LogicalGpu] = []
    for pos, detail in enumerate(logical_details):
        name = str(detail.get("name", f"/device:GPU:{pos}"))
        k = int(detail.get("physical_index", pos))
        raw_pci = detail.get("pci_bus_id")
        pci = normalize_pci_bus_id(str(raw_pci)) if raw_pci else None
        if pci is not None and pci in by_pci:
            out.append(LogicalGpu(name, k, by_pci[pci], pci, "pci_bus_id"))
            continue
        miss = f"PCI bus id {raw_pci} not among NVML's devices; " if raw_pci else ""
        if visible is not None:
            if k >= len(visible):
                out.append(
                    LogicalGpu(
                        name,
                        k,
                        None,
                        pci,
                        "unresolved",
                        f"{miss}CUDA_VISIBLE_DEVICES has no entry {k}",
                    )
                )
                continue
            idx, why = _resolve_token(visible[k], physical)
            if idx is None:
                out.append(LogicalGpu(name, k, None, pci, "unresolved", miss + str(why)))
                continue
            note = order_note if visible[k].isdigit() else None
            out.append(
                LogicalGpu(
                    name,
                    k,
                    idx,
                    pci,
                    "cuda_visible_devices",
                    (miss + note) if note else (miss or None),
                )
            )
            continue
        if any(p.index == k for p in physical):
            out.append(
                LogicalGpu(
                    name,
                    k,
                    k,
                    pci,
                    "ordinal",
                    (miss + str(order_note)) if order_note else (miss or None),
                )
            )
        else:
            out.append(LogicalGpu(name, k, None, pci, "unresolved", f"{miss}NVML lists no GPU {k}"))
    return out


def logical_by_physical(mapping: Sequence[LogicalGpu]) -> dict[int, list[str]]:
    """NVML index -> the logical GPU names on it (split GPUs give several names)."""
    out: dict[int, list[str]] = {}
    for m in mapping:
        if m.nvml_index is not None:
            out.setdefault(m.nvml_index, []).append(m.logical_name)
    return out


__all__ = [
    "DEFAULT_ACTIVE_THRESHOLD_PERCENT",
    "DEFAULT_INTERVAL_S",
    "MIN_INTERVAL_S",
    "NOT_AVAILABLE",
    "DeviceError",
    "DeviceInfo",
    "DeviceState",
    "DeviceSummary",
    "LogicalGpu",
    "NotAvailable",
    "NvmlBackend",
    "NvmlUnavailable",
    "PcieThroughput",
    "ProcessSeen",
    "ProcessUsage",
    "PynvmlBackend",
    "Sample",
    "Sampler",
    "SamplerCost",
    "SamplingResult",
    "TimedUtil",
    "UtilSample",
    "logical_by_physical",
    "map_logical_to_physical",
    "normalize_pci_bus_id",
    "open_backend",
    "or_none",
    "parse_cuda_visible_devices",
    "pci_bus_id_from_desc",
    "percentile",
    "query",
    "summarise_device",
    "write_scalars",
]
