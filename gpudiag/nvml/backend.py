"""The door to NVML: the small backend interface, the real backend and how it is opened.

This is the only module in gpudiag that imports pynvml (NVIDIA's nvidia-ml-py bindings),
and only inside :func:`open_backend`, so importing gpudiag.nvml costs nothing where NVML
is absent. It imports no TensorFlow.

* :class:`NvmlBackend` (a Protocol) is everything the rest of gpudiag asks of NVML. Tests
  implement it with scripted scenarios (tests/fake_nvml.py); pynvml is never patched.
* :func:`open_backend` returns the real one (:class:`PynvmlBackend`) when ``nvmlInit``
  succeeds and reports at least one GPU, and an :class:`NvmlUnavailable` with the reason
  otherwise (no library, no driver, no GPU).
* :func:`opened` is how every command gets its backend: a context manager that opens it
  (with ``open_backend`` or the opener it is given) and closes it on the way out, so the
  code that opens NVML is the code that closes it. Commands take the backend as a
  parameter and never close it.

Every pynvml call of the real backend goes through one helper, :func:`query`:

- a value the device does not support (``NVMLError_NotSupported``, a function the driver
  lacks, no permission) comes back as :data:`NOT_AVAILABLE`, never as an exception;
- any other NVML error (``NVMLError_GpuIsLost`` ...) is raised as :class:`DeviceError`,
  which the sampler turns into an error record for that one device while the others keep
  reporting.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any, Final, Protocol, TypeVar

from gpudiag.nvml.gpm import PynvmlGpm
from gpudiag.nvml.records import (
    NOT_AVAILABLE,
    DeviceError,
    DeviceInfo,
    DeviceState,
    GpmReading,
    GpmUnavailable,
    NotAvailable,
    NvmlUnavailable,
    PcieThroughput,
    ProcessUsage,
    UtilSample,
)

T = TypeVar("T")


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

    def gpm_start(self, index: int) -> GpmUnavailable | None:
        """Start GPM on a device (its first sample); None when it works, else why not."""
        ...

    def gpm_read(self, index: int) -> GpmReading | GpmUnavailable:
        """GPM metrics over the time since the previous gpm_read (or gpm_start)."""
        ...

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
        self._gpm = PynvmlGpm(nv)
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

    def gpm_start(self, index: int) -> GpmUnavailable | None:
        return self._gpm.start(index, self._handle(index))

    def gpm_read(self, index: int) -> GpmReading | GpmUnavailable:
        return self._gpm.read(index, self._handle(index))

    def close(self) -> None:
        self._gpm.close()
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


#: Opens NVML: :func:`open_backend`, or a test's scripted scenario.
Opener = Callable[[], NvmlBackend | NvmlUnavailable]


@contextlib.contextmanager
def opened(opener: Opener | None = None) -> Iterator[NvmlBackend | NvmlUnavailable]:
    """Open NVML (``opener``, default :func:`open_backend`) for the ``with`` block and close
    it after, however the block ends. Yields the backend or the NvmlUnavailable reason."""
    backend = (opener or open_backend)()
    try:
        yield backend
    finally:
        if not isinstance(backend, NvmlUnavailable):
            backend.close()
