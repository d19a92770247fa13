"""A fake NVML backend with named, scripted scenarios (NVML cannot exist on this machine).

It implements gpudiag.nvml.NvmlBackend, the same interface the real pynvml backend
implements, and is injected where the real code takes a backend (a command function's
``backend`` parameter, ``Sampler(backend)``, or ``gpudiag.cli.main(argv, open_nvml=...)``
for the whole CLI); pynvml is never patched. Each device is scripted as functions of the
seconds since the fake was opened on its ``clock``: the real clock by default, so a
Sampler running in real time beside a real command sees the scenario unfold, or a
tests/fake_clock.FakeClock shared with the Sampler, so a test moves time itself:

* ``busy``              every GPU at ~90 % with memory growing,
* ``one_idle``          GPU 1 stays at 0 % while the others work,
* ``lost_mid_run``      GPU 1 answers "GPU is lost" after ``lost_after_s``,
* ``lost_at_start``     GPU 1 is lost before the first poll,
* ``unsupported``       a GPU that gives utilization and memory only (no power,
                        temperature, clocks, PCIe, driver samples or process list),
* ``no_utilization``    a GPU that gives memory but no utilization at all,
* ``small_kernels``     GPM (Hopper and later): NVML's utilization reads 100 % while GPM's
                        SM utilization is 3 % and occupancy 1.5 %: a few small kernels,
* ``gpm_busy``          GPM: utilization 90 % with SM utilization 85 %: a full GPU,
* ``no_nvml``           open_scenario returns NvmlUnavailable, as open_backend does here.

Every other scenario's GPUs do not offer GPM (``gpm_start`` says why, as on pre-Hopper GPUs).

``calls`` counts every method call per name, so tests can check what the sampler asks
and how often (handles, per-process query out of the fast loop).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from gpudiag.nvml import (
    NOT_AVAILABLE,
    SYSTEM_CLOCK,
    Clock,
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

GIB = 2**30
#: What gpudiag.nvml.gpm says on a GPU without GPM (before Hopper).
NO_GPM_REASON = ("this GPU does not offer GPM metrics (nvmlGpmQueryDeviceSupport: Hopper "
                 "and later do)")
GPM_FIELDS = ("sm_util_percent", "sm_occupancy_percent", "tensor_util_percent",
              "dram_bw_util_percent")
DRIVER_SAMPLE_PERIOD_S = 1 / 6

Curve = Callable[[float], float]


def const(v: float) -> Curve:
    return lambda t: v


_BUSY = const(90.0)
_POWER = const(250.0)


def _growing_memory(t: float) -> float:
    return GIB + int(t * 100 * 2**20)


@dataclass
class FakeDevice:
    """One scripted GPU. ``unsupported`` names backend readings that are NOT_AVAILABLE:
    any DeviceState field, or "samples", "processes", "pcie", "power_limit_w"."""

    name: str = "Fake GPU 40GB"
    memory_total_bytes: int = 40 * GIB
    power_limit_w: float = 300.0
    util_percent: Curve = _BUSY
    memory_used_bytes: Curve = _growing_memory
    power_draw_w: Curve = _POWER
    pids: tuple[int, ...] = (4242,)
    lost_after_s: float | None = None
    unsupported: frozenset[str] = frozenset()
    uuid: str = ""
    pci_bus_id: str = ""
    #: GPM metrics (GpmReading's field names) as curves; None: the GPU has no GPM
    gpm: dict[str, Curve] | None = None


@dataclass
class FakeBackend:
    devices: list[FakeDevice]
    scenario: str = "custom"
    calls: Counter[str] = field(default_factory=Counter)
    closed: bool = False
    clock: Clock = SYSTEM_CLOCK

    def __post_init__(self) -> None:
        self._mono0 = self.clock.monotonic()
        self._wall0 = self.clock.time()
        self._lock = threading.Lock()
        for i, d in enumerate(self.devices):
            d.uuid = d.uuid or f"GPU-{i:08d}-fake-0000-0000-{i:012d}"
            d.pci_bus_id = d.pci_bus_id or f"00000000:{0x3B + i:02X}:00.0"

    # -- helpers

    def _t(self) -> float:
        """Seconds since the fake was opened (the scenario's time)."""
        return self.clock.monotonic() - self._mono0

    def _device(self, method: str, index: int) -> FakeDevice:
        with self._lock:
            self.calls[method] += 1
        if not 0 <= index < len(self.devices):
            raise DeviceError(index, "Invalid Argument")
        d = self.devices[index]
        if d.lost_after_s is not None and self._t() >= d.lost_after_s:
            raise DeviceError(index, "GPU is lost")
        return d

    @staticmethod
    def _maybe(d: FakeDevice, name: str, value: float) -> float | NotAvailable:
        return NOT_AVAILABLE if name in d.unsupported else value

    # -- NvmlBackend

    @property
    def description(self) -> str:
        return f"fake NVML ({self.scenario})"

    def device_count(self) -> int:
        self.calls["device_count"] += 1
        return len(self.devices)

    def device_info(self, index: int) -> DeviceInfo:
        d = self._device("device_info", index)
        return DeviceInfo(
            index=index,
            name=d.name,
            uuid=d.uuid,
            pci_bus_id=d.pci_bus_id,
            memory_total_bytes=d.memory_total_bytes,
            power_limit_w=self._maybe(d, "power_limit_w", d.power_limit_w),
        )

    def device_state(self, index: int) -> DeviceState:
        d = self._device("device_state", index)
        t = self._t()
        util = d.util_percent(t)
        return DeviceState(
            util_gpu_percent=self._maybe(d, "util_gpu_percent", util),
            util_memory_percent=self._maybe(d, "util_memory_percent", util / 2),
            memory_used_bytes=(
                NOT_AVAILABLE
                if "memory_used_bytes" in d.unsupported
                else int(d.memory_used_bytes(t))
            ),
            memory_total_bytes=d.memory_total_bytes,
            power_draw_w=self._maybe(d, "power_draw_w", d.power_draw_w(t)),
            temperature_c=self._maybe(d, "temperature_c", 40 + util / 4),
            sm_clock_mhz=NOT_AVAILABLE if "sm_clock_mhz" in d.unsupported else 1410,
            memory_clock_mhz=NOT_AVAILABLE if "memory_clock_mhz" in d.unsupported else 1215,
        )

    def utilization_samples(self, index: int, since_us: int) -> list[UtilSample] | NotAvailable:
        d = self._device("utilization_samples", index)
        if "samples" in d.unsupported:
            return NOT_AVAILABLE
        # The driver keeps a sample every 1/6 s; return those after since_us, up to now.
        now_t = self._t()
        start_t = max(0.0, since_us / 1e6 - self._wall0)
        k = int(start_t / DRIVER_SAMPLE_PERIOD_S)
        out = []
        while (t := k * DRIVER_SAMPLE_PERIOD_S) <= now_t:
            ts = int((self._wall0 + t) * 1e6)
            if ts > since_us:
                out.append(UtilSample(ts, d.util_percent(t)))
            k += 1
        return out

    def processes(self, index: int) -> list[ProcessUsage] | NotAvailable:
        d = self._device("processes", index)
        if "processes" in d.unsupported:
            return NOT_AVAILABLE
        used = int(d.memory_used_bytes(self._t()))
        return [ProcessUsage(pid, used // max(len(d.pids), 1)) for pid in d.pids]

    def pcie_throughput(self, index: int) -> PcieThroughput:
        d = self._device("pcie_throughput", index)
        if "pcie" in d.unsupported:
            return PcieThroughput(NOT_AVAILABLE, NOT_AVAILABLE)
        return PcieThroughput(1000, 2000)

    def gpm_start(self, index: int) -> GpmUnavailable | None:
        d = self._device("gpm_start", index)
        return GpmUnavailable(NO_GPM_REASON) if d.gpm is None else None

    def gpm_read(self, index: int) -> GpmReading | GpmUnavailable:
        d = self._device("gpm_read", index)
        if d.gpm is None:
            return GpmUnavailable("GPM was not started on this device")
        t = self._t()
        return GpmReading(**{name: d.gpm[name](t) if name in d.gpm else NOT_AVAILABLE
                             for name in GPM_FIELDS})

    def close(self) -> None:
        self.closed = True


# --------------------------------------------------------------------------- scenarios


def busy(n: int = 2, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    return FakeBackend([FakeDevice() for _ in range(n)], scenario="busy", clock=clock)


def one_idle(n: int = 2, idle_index: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    devices = [FakeDevice(pids=(4242 + i,)) for i in range(n)]
    devices[idle_index] = FakeDevice(
        util_percent=const(0.0),
        memory_used_bytes=const(300 * 2**20),
        power_draw_w=const(55.0),
        pids=(),
    )
    return FakeBackend(devices, scenario="one_idle", clock=clock)


def lost_mid_run(
    n: int = 2, lost_index: int = 1, lost_after_s: float = 0.35, *, clock: Clock = SYSTEM_CLOCK
) -> FakeBackend:
    devices = [FakeDevice() for _ in range(n)]
    devices[lost_index].lost_after_s = lost_after_s
    return FakeBackend(devices, scenario="lost_mid_run", clock=clock)


def lost_at_start(n: int = 2, lost_index: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    devices = [FakeDevice() for _ in range(n)]
    devices[lost_index].lost_after_s = 0.0
    return FakeBackend(devices, scenario="lost_at_start", clock=clock)


UNSUPPORTED_ALL_BUT_UTIL_AND_MEMORY = frozenset(
    {
        "power_draw_w",
        "temperature_c",
        "sm_clock_mhz",
        "memory_clock_mhz",
        "util_memory_percent",
        "samples",
        "processes",
        "pcie",
        "power_limit_w",
    }
)


def unsupported(n: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    return FakeBackend(
        [FakeDevice(unsupported=UNSUPPORTED_ALL_BUT_UTIL_AND_MEMORY) for _ in range(n)],
        scenario="unsupported",
        clock=clock,
    )


def no_utilization(n: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    return FakeBackend(
        [
            FakeDevice(unsupported=UNSUPPORTED_ALL_BUT_UTIL_AND_MEMORY | {"util_gpu_percent"})
            for _ in range(n)
        ],
        scenario="no_utilization",
        clock=clock,
    )


def small_kernels(n: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    """NVML's utilization at 100 %, GPM's SM utilization at 3 %: a few small kernels."""
    gpm = {"sm_util_percent": const(3.0), "sm_occupancy_percent": const(1.5),
           "tensor_util_percent": const(0.0), "dram_bw_util_percent": const(2.0)}
    return FakeBackend([FakeDevice(name="Fake H100 80GB", util_percent=const(100.0), gpm=gpm)
                        for _ in range(n)], scenario="small_kernels", clock=clock)


def gpm_busy(n: int = 1, *, clock: Clock = SYSTEM_CLOCK) -> FakeBackend:
    """GPM on a GPU the kernels fill: utilization 90 %, SM utilization 85 %."""
    gpm = {"sm_util_percent": const(85.0), "sm_occupancy_percent": const(40.0),
           "tensor_util_percent": const(60.0), "dram_bw_util_percent": const(50.0)}
    return FakeBackend([FakeDevice(name="Fake H100 80GB", gpm=gpm) for _ in range(n)],
                       scenario="gpm_busy", clock=clock)


NO_NVML_REASON = (
    "NVML did not initialise: libnvidia-ml.so.1 was not found: no NVIDIA driver is installed "
    "here (NVML Shared Library Not Found)"
)

SCENARIOS: dict[str, Callable[[], FakeBackend]] = {
    "busy": busy,
    "one_idle": one_idle,
    "lost_mid_run": lost_mid_run,
    "lost_at_start": lost_at_start,
    "unsupported": unsupported,
    "no_utilization": no_utilization,
    "small_kernels": small_kernels,
    "gpm_busy": gpm_busy,
}


def open_scenario(name: str) -> FakeBackend | NvmlUnavailable:
    """Like gpudiag.nvml.open_backend, for a named scenario ("no_nvml" included)."""
    if name == "no_nvml":
        return NvmlUnavailable(NO_NVML_REASON)
    return SCENARIOS[name]()
