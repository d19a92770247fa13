"""The NVML sampler: two threads in the *parent* process that watch every GPU while a
workload runs (so a crash of the workload does not lose the samples).

The fast thread polls every device each ``interval_s`` (default 0.5 s, never below 0.1 s:
NVML computes utilization over a window of 1/6 s to 1 s depending on the GPU, so polling
faster only takes the driver's lock more often) and, between polls, drains the driver's
own buffered utilization samples (``nvmlDeviceGetSamples``), so a short run still gets
fine-grained data, and, where the GPU offers GPM (Hopper and later), reads the GPM metrics
(SM utilization and occupancy, tensor-core and DRAM bandwidth utilization) over the time
since its previous reading (each covering at least GPM_MIN_SPAN_S). The slow thread
queries the per-process list and PCIe throughput (``nvmlDeviceGetPcieThroughput``
measures over 20 ms per call), so neither delays the fast loop. The sampler measures its
own cost (CPU seconds of both threads, wall time per poll): see :class:`SamplerCost` and
benchmarks/sampler_cost.py.

Time comes from a :class:`Clock`: the system's by default; tests give a fake one that
moves only when told, so every poll happens at a known instant and no test sleeps. Only
scheduling and timestamps use the clock; the sampler's cost is always measured on the real
clocks (``time.thread_time``, ``time.perf_counter``).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable, Sequence
from typing import Final, Protocol

from gpudiag.nvml.backend import NvmlBackend
from gpudiag.nvml.records import (
    NOT_AVAILABLE,
    DeviceError,
    DeviceInfo,
    GpmUnavailable,
    PcieThroughput,
    ProcessSeen,
    Sample,
    SamplerCost,
    SamplingResult,
    TimedGpm,
    TimedUtil,
)
from gpudiag.nvml.summaries import (
    DEFAULT_ACTIVE_THRESHOLD_PERCENT,
    DEFAULT_INTERVAL_S,
    DeviceSamples,
    summarise_device,
)

MIN_INTERVAL_S: Final = 0.1
#: A GPM reading covers at least this long (the poll right after start has nothing yet).
GPM_MIN_SPAN_S: Final = MIN_INTERVAL_S / 2
#: The slow loop (processes, PCIe) runs at most this often.
DEFAULT_SLOW_INTERVAL_S: Final = 1.0
#: The sampler's threads are named ``gpudiag-nvml-fast`` and ``gpudiag-nvml-slow``.
THREAD_NAME_PREFIX: Final = "gpudiag-nvml-"
#: How long ``stop`` waits for a poll in progress: a driver call that hangs (a GPU falling
#: off the bus) must not keep gpudiag from ending, a stop request's included.
STOP_WAIT_S = 10.0


class Clock(Protocol):
    """Where the sampler gets its time and how its threads wait."""

    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (``time.monotonic``)."""
        ...

    def time(self) -> float:
        """Wall clock, seconds since the epoch (``time.time``)."""
        ...

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        """Block until ``stop`` is set or ``timeout_s`` passed; True when ``stop`` is set."""
        ...


class SystemClock:
    """The real clock: ``time.monotonic``, ``time.time``, ``Event.wait``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()

    def wait(self, stop: threading.Event, timeout_s: float) -> bool:
        return stop.wait(timeout_s)


SYSTEM_CLOCK: Final = SystemClock()


def _unknown_info(index: int) -> DeviceInfo:
    na = NOT_AVAILABLE
    return DeviceInfo(index, na, na, na, na, na)


class Sampler:
    """Samples NVML devices from two threads in this (the parent) process.

    ``Sampler(backend, interval_s=0.5, device_indices=None)``; ``start()`` before the
    workload starts, ``stop()`` after it ends (returns a SamplingResult); or use it as a
    context manager (``result`` holds the SamplingResult after the block). A device that
    fails (DeviceError) stops being polled and gets ``error`` in its summary; the others
    keep reporting. The sampler does not own the backend: whoever opened it closes it.
    """

    def __init__(
        self,
        backend: NvmlBackend,
        interval_s: float = DEFAULT_INTERVAL_S,
        device_indices: Sequence[int] | None = None,
        *,
        active_threshold_percent: float = DEFAULT_ACTIVE_THRESHOLD_PERCENT,
        slow_interval_s: float | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        if not interval_s >= MIN_INTERVAL_S:  # also rejects NaN
            raise ValueError(
                f"interval_s must be at least {MIN_INTERVAL_S} s (NVML's utilization window "
                f"is 1/6 s to 1 s; polling faster only holds the driver's lock), got {interval_s}"
            )
        self._backend = backend
        self._clock = clock
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
        self._gpm: list[TimedGpm] = []
        self._gpm_last_t: dict[int, float] = {}  # index -> when GPM's period began
        self._gpm_reasons: dict[int, str] = {}  # index -> why no (more) GPM readings
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

    def samples_since(self, polls: int, driver: int, gpm: int
                      ) -> tuple[list[Sample], list[TimedUtil], list[TimedGpm]]:
        """While it runs (and after): the polls after the first ``polls`` taken, the
        driver's samples after the first ``driver`` read and the GPM readings after the
        first ``gpm`` (gpudiag.run.live follows them by count). The lists only grow, so a
        slice is a consistent view."""
        return self._samples[polls:], self._utils[driver:], self._gpm[gpm:]

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
        self._t0 = self._clock.monotonic()
        self._wall0 = self._clock.time()
        for i in self._indices:
            try:
                self._infos[i] = self._backend.device_info(i)
            except DeviceError as exc:
                self._infos[i] = _unknown_info(i)
                self._errors[i] = f"{exc.reason} (at start)"
            self._since_us[i] = int(self._wall0 * 1e6)
            if i not in self._errors:
                self._start_gpm(i)
            self._procs[i] = {}
            self._pcie[i] = []
        self._threads = [
            threading.Thread(target=self._run, args=(loop,), name=THREAD_NAME_PREFIX + name,
                             daemon=True)
            for name, loop in (("fast", self._fast_loop), ("slow", self._slow_loop))
        ]
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> SamplingResult:
        """Stop both threads, take a last poll (drains the driver's buffer), summarise."""
        if self.result is not None:
            return self.result
        if not self._started:
            raise RuntimeError("Sampler.stop() before start()")
        self._stop.set()
        deadline = time.monotonic() + STOP_WAIT_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        hung = [t.name for t in self._threads if t.is_alive()]
        if hung:  # left behind (daemon threads): no last poll into a driver that hangs
            with self._lock:
                self._thread_error = self._thread_error or (
                    f"{', '.join(hung)}: an NVML call had not returned {STOP_WAIT_S:g} s "
                    "after the stop: sampling ended there")
        else:
            self._run(self._poll_all)  # last poll: drains the driver samples since the last
        duration = self._clock.monotonic() - self._t0
        self.result = self._summarise(duration)
        return self.result

    def __enter__(self) -> Sampler:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
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
        clock = self._clock
        next_t = clock.monotonic()
        while not self._stop.is_set():
            self._poll_all()
            next_t += self.interval_s
            delay = next_t - clock.monotonic()
            if delay < 0:  # fell behind (a slow driver): do not burst to catch up
                next_t, delay = clock.monotonic(), 0.0
            if clock.wait(self._stop, delay):
                return

    def _slow_loop(self) -> None:
        # First slow poll one fast interval in: the workload has usually started by then.
        wait_s = self.interval_s
        while not self._clock.wait(self._stop, wait_s):
            self._slow_poll()
            wait_s = self.slow_interval_s

    def _now_s(self) -> float:
        """Seconds since start on the sampler's clock."""
        return self._clock.monotonic() - self._t0

    def _alive(self) -> list[int]:
        with self._lock:
            return [i for i in self._indices if i not in self._errors]

    def _fail(self, index: int, exc: DeviceError) -> None:
        with self._lock:
            if index not in self._errors:
                self._errors[index] = f"{exc.reason} (at {self._now_s():.1f} s)"

    def _start_gpm(self, index: int) -> None:
        try:
            gpm = self._backend.gpm_start(index)
        except DeviceError as exc:
            gpm = GpmUnavailable(f"GPM failed at start: {exc.reason}")
        if gpm is None:
            self._gpm_last_t[index] = self._now_s()
        else:
            self._gpm_reasons[index] = gpm.reason

    def _read_gpm(self, index: int) -> None:
        """One GPM reading when GPM works there and GPM_MIN_SPAN_S passed since the last."""
        begun = self._gpm_last_t.get(index)
        if begun is None or index in self._gpm_reasons or self._now_s() - begun < GPM_MIN_SPAN_S:
            return
        reading = self._backend.gpm_read(index)
        t = self._now_s()
        if isinstance(reading, GpmUnavailable):
            self._gpm_reasons[index] = f"{reading.reason} (at {t:.1f} s)"
            return
        self._gpm.append(TimedGpm(t, self._wall0 + t, index, t - begun, reading))
        self._gpm_last_t[index] = t

    def _poll_all(self) -> None:
        begin = time.perf_counter()
        for i in self._alive():
            try:
                state = self._backend.device_state(i)
                fine = self._backend.utilization_samples(i, self._since_us[i])
                self._read_gpm(i)
            except DeviceError as exc:
                self._fail(i, exc)
                continue
            t = self._now_s()
            self._samples.append(Sample(t, self._wall0 + t, i, state))
            if fine is not NOT_AVAILABLE and fine:
                self._since_us[i] = max(u.timestamp_us for u in fine)
                self._utils.extend(
                    TimedUtil(
                        u.timestamp_us / 1e6 - self._wall0, u.timestamp_us / 1e6, i, u.util_percent
                    )
                    for u in fine
                )
        self._poll_walls.append(time.perf_counter() - begin)

    def _slow_poll(self) -> None:
        self._slow_polls += 1
        for i in self._alive():
            try:
                procs = self._backend.processes(i)
                pcie = self._backend.pcie_throughput(i)
            except DeviceError as exc:
                self._fail(i, exc)
                continue
            t = self._now_s()
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
                    DeviceSamples(
                        self._infos[i], samples, [u for u in self._utils if u.index == i],
                        processes=list(self._procs[i].values()), pcie=self._pcie[i],
                        gpm=[g for g in self._gpm if g.index == i],
                        gpm_unavailable_reason=self._gpm_reasons.get(i), error=error),
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
            gpm_samples=tuple(self._gpm),
        )
