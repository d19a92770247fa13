"""Pure summaries of what a sampler saw: one device's polls and driver samples -> a
DeviceSummary (mean, p50, p95, max utilization, seconds active, peaks). No I/O, no clock:
tested with scripted samples.

What NVML's utilization means: ``utilization.gpu`` is the share of the last sample
period during which *at least one kernel* was running on the GPU. It is not how full the
SMs were: a single tiny kernel running back to back reads 100 %. A GPU under the idle
threshold did (almost) no work; a GPU at 100 % may still be badly used. Where the GPU
offers GPM (Hopper and later), its SM utilization and occupancy say how much: their
time-weighted means are in the summary beside NVML's utilization.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Final, Literal, TypeVar

from gpudiag.nvml.records import (
    NOT_AVAILABLE,
    DeviceInfo,
    DeviceState,
    DeviceSummary,
    NotAvailable,
    PcieThroughput,
    ProcessSeen,
    Sample,
    TimedGpm,
    TimedUtil,
)

#: Seconds between polls when nobody says otherwise (the sampler's default too).
DEFAULT_INTERVAL_S: Final = 0.5
#: Utilization at or above this counts as active; a GPU whose p95 stays under it is idle.
DEFAULT_ACTIVE_THRESHOLD_PERCENT: Final = 10.0
#: How often the driver buffers a utilization sample (1/6 s on most GPUs): the span a
#: first driver sample stands for when there is no gap to measure.
DRIVER_SAMPLE_PERIOD_S: Final = 1.0 / 6.0

T = TypeVar("T")


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (0 <= q <= 100) of already sorted values."""
    if not sorted_values:
        raise ValueError("percentile of no values")
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def quantile_ci(sorted_values: Sequence[float], q: float, confidence: float = 0.95
                ) -> tuple[float, float] | None:
    """The distribution-free interval of the ``q``-th percentile (0 < q < 100) of already
    sorted values: the j-th and k-th smallest hold it with probability
    P(j <= Binomial(n, q/100) < k), grown one rank at a time on the side of more mass
    until that is at least ``confidence``. None when even the whole range holds it with
    less (for the 95th percentile at 95 %: under 72 values): then the percentile is a
    point and says so. Samples a few tenths of a second apart are not independent, so the
    interval is the sampling's, narrower than a rerun's spread would be."""
    n = len(sorted_values)
    if n < 2:
        return None
    p = q / 100.0

    def mass(i: int) -> float:  # P(Binomial(n, p) == i)
        return math.comb(n, i) * p**i * (1 - p) ** (n - i)

    # [x_(a), x_(b+1)] (1-based order statistics) holds the percentile when a <= B <= b,
    # B the count of values under it; 1 <= a <= b <= n - 1
    a = b = min(n - 1, max(1, math.floor(n * p)))
    covered = mass(a)
    while covered < confidence:
        down = mass(a - 1) if a > 1 else -1.0
        up = mass(b + 1) if b < n - 1 else -1.0
        if down < 0 and up < 0:
            return None
        if down >= up:
            a -= 1
            covered += down
        else:
            b += 1
            covered += up
    return sorted_values[a - 1], sorted_values[b]


def durations(times_s: Sequence[float], fallback_s: float) -> list[float]:
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


def gpm_mean(readings: Sequence[TimedGpm], field: str) -> float | NotAvailable:
    """Time-weighted mean of one GpmReading field over the readings that have it."""
    pairs = [(g.span_s, v) for g in readings
             if (v := getattr(g.reading, field)) is not NOT_AVAILABLE and g.span_s > 0]
    total = sum(span for span, _ in pairs)
    return sum(span * v for span, v in pairs) / total if total > 0 else NOT_AVAILABLE


@dataclass(frozen=True)
class DeviceSamples:
    """Everything sampled for one device (``info.index``), as summarise_device reads it.

    ``gpm``: the device's GPM readings; ``gpm_unavailable_reason``: why there are none (or
    why they stopped); ``error``: the device was lost (NVML failed for it)."""

    info: DeviceInfo
    samples: Sequence[Sample]
    util_samples: Sequence[TimedUtil] = ()
    processes: Sequence[ProcessSeen] = ()
    pcie: Sequence[PcieThroughput] = ()
    gpm: Sequence[TimedGpm] = ()
    gpm_unavailable_reason: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class _UtilStats:
    source: Literal["driver", "polled", "none"]
    count: int
    mean: float | NotAvailable = NOT_AVAILABLE
    p50: float | NotAvailable = NOT_AVAILABLE
    p95: float | NotAvailable = NOT_AVAILABLE
    max: float | NotAvailable = NOT_AVAILABLE
    active_s: float | NotAvailable = NOT_AVAILABLE
    p95_ci: tuple[float, float] | None = None


def _util_stats(device: DeviceSamples, interval_s: float,
                active_threshold_percent: float) -> _UtilStats:
    """Utilization from the driver's own samples when there are any, else from the polls."""
    polled = [(s.t_s, s.state.util_gpu_percent) for s in device.samples
              if s.state.util_gpu_percent is not NOT_AVAILABLE]
    source: Literal["driver", "polled", "none"]
    if device.util_samples:
        source = "driver"
        series = sorted((u.t_s, u.util_percent) for u in device.util_samples)
        fallback = DRIVER_SAMPLE_PERIOD_S
    elif polled:
        source, series, fallback = "polled", [(t, float(u)) for t, u in polled], interval_s
    else:
        return _UtilStats("none", 0)
    values = sorted(u for _, u in series)
    spans = durations([t for t, _ in series], fallback)
    active = sum(d for d, (_, u) in zip(spans, series, strict=True)
                 if u >= active_threshold_percent)
    return _UtilStats(source, len(series), statistics.fmean(values), percentile(values, 50),
                      percentile(values, 95), values[-1], active, quantile_ci(values, 95))


def _unavailable_fields(device: DeviceSamples) -> list[str]:
    """The fields NVML never gave for this device (not supported, or no permission)."""
    states = [s.state for s in device.samples]
    unavailable = [name for name in (f.name for f in fields(DeviceState))
                   if states and all(getattr(s, name) is NOT_AVAILABLE for s in states)]
    unavailable += [name for name in ("name", "uuid", "pci_bus_id", "memory_total_bytes",
                                      "power_limit_w")
                    if getattr(device.info, name) is NOT_AVAILABLE]
    if device.samples and not device.util_samples:
        unavailable.append("utilization_samples")
    if device.pcie and all(p.tx_kib_per_s is NOT_AVAILABLE for p in device.pcie):
        unavailable.append("pcie_throughput")
    return unavailable


def summarise_device(
    device: DeviceSamples,
    *,
    observed_s: float,
    interval_s: float = DEFAULT_INTERVAL_S,
    active_threshold_percent: float = DEFAULT_ACTIVE_THRESHOLD_PERCENT,
) -> DeviceSummary:
    """Pure: summarise one device's samples (all of them for ``device.info.index``)."""
    info, pcie, gpm = device.info, device.pcie, device.gpm
    states = [s.state for s in device.samples]
    util = _util_stats(device, interval_s, active_threshold_percent)
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
        poll_count=len(device.samples),
        util_source=util.source,
        util_sample_count=util.count,
        util_mean_percent=util.mean,
        util_p50_percent=util.p50,
        util_p95_percent=util.p95,
        util_max_percent=util.max,
        util_p95_ci_percent=util.p95_ci,
        active_threshold_percent=active_threshold_percent,
        active_s=util.active_s,
        memory_util_mean_percent=statistics.fmean(mem_util) if mem_util else NOT_AVAILABLE,
        peak_memory_used_bytes=max(mem_used) if mem_used else NOT_AVAILABLE,
        power_mean_w=statistics.fmean(power) if power else NOT_AVAILABLE,
        power_max_w=max(power) if power else NOT_AVAILABLE,
        power_limit_w=info.power_limit_w,
        temperature_max_c=max(temps) if temps else NOT_AVAILABLE,
        pcie_tx_max_kib_per_s=max(tx) if tx else NOT_AVAILABLE,
        pcie_rx_max_kib_per_s=max(rx) if rx else NOT_AVAILABLE,
        processes=tuple(sorted(device.processes, key=lambda p: p.pid)),
        unavailable_fields=tuple(_unavailable_fields(device)),
        error=device.error,
        gpm_reading_count=len(gpm),
        sm_util_mean_percent=gpm_mean(gpm, "sm_util_percent"),
        sm_occupancy_mean_percent=gpm_mean(gpm, "sm_occupancy_percent"),
        tensor_util_mean_percent=gpm_mean(gpm, "tensor_util_percent"),
        dram_bw_util_mean_percent=gpm_mean(gpm, "dram_bw_util_percent"),
        gpm_unavailable_reason=device.gpm_unavailable_reason
        if device.gpm_unavailable_reason or gpm else
        f"no GPM reading in the {observed_s:.1f} s watched",
    )
