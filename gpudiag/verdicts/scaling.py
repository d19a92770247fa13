"""Verdicts of `gpudiag scaling`: did more devices help, did every device work (did it
learn: gpudiag.verdicts.scaling_learning).

Evidence: per configuration (strategy x device count) the training probe's throughput,
ops per device and profiler-trace busy time; the collective probe's all-reduce table.
The thresholds below are the rules' numbers, named so docs/findings.md can quote them.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.layout.units import share as pct
from gpudiag.records.training import AllreduceResult
from gpudiag.report import Finding
from gpudiag.verdicts import stats
from gpudiag.verdicts.common import title

# Efficiency = throughput(n) / (n x throughput(1)) that well-tuned data-parallel CNN
# training reaches within one node; below it is a warn.
SCALING_OK_EFFICIENCY = {2: 0.95, 4: 0.93, 8: 0.90}
SHARED_DEVICE_KINDS = ("virtual-cpu", "virtual-gpu")
INPUT_WAIT_CAUSE_FRACTION = 0.10  # of the traced window spent handing over batches
AVERAGING_CAUSE_FRACTION = 0.20  # of a step that the all-reduce lower bound alone takes
TOWERS_SLOWER_RATIO = 0.90  # towers below this x mirrored throughput is a warn


@dataclass(frozen=True)
class ThroughputPoint:
    """One configuration's throughput; scaling_rows fills speedup and efficiency."""

    strategy: str
    n_devices: int
    name: str
    examples_per_s: float | None  # median over the timed steps
    step_s: float | None  # median seconds per step
    input_wait_fraction: float | None = None  # of the traced window
    trace_busy_fraction: dict[str, float] | None = None  # per device, of the traced window
    speedup: float | None = None  # vs the same strategy on 1 device
    efficiency: float | None = None  # speedup / n_devices
    # seconds of each timed step (the efficiency's interval: gpudiag.verdicts.stats)
    timed_step_s: tuple[float, ...] = ()


def efficiency_threshold(n_devices: int) -> float:
    """The ok threshold for ``n_devices`` (0.95 up to 2, 0.93 up to 4, 0.90 beyond)."""
    for n, threshold in sorted(SCALING_OK_EFFICIENCY.items()):
        if n_devices <= n:
            return threshold
    return SCALING_OK_EFFICIENCY[max(SCALING_OK_EFFICIENCY)]


def allreduce_lower_bound_s(gradient_bytes: int, n_devices: int, busbw_bytes_per_s: float) -> float:
    """Least time an all-reduce of ``gradient_bytes`` over ``n_devices`` can take:
    a ring moves bytes x 2(n-1)/n over each link, at best at the bus bandwidth."""
    if n_devices < 2 or busbw_bytes_per_s <= 0:
        return 0.0
    return gradient_bytes * 2 * (n_devices - 1) / n_devices / busbw_bytes_per_s


def scaling_rows(points: Sequence[ThroughputPoint]) -> list[ThroughputPoint]:
    """Speedup and efficiency per configuration, sorted by strategy and device count; the
    same strategy's 1-device point is the base."""
    base = {p.strategy: p for p in points if p.n_devices == 1}
    rows = []
    for p in sorted(points, key=lambda q: (q.strategy, q.n_devices)):
        b = base.get(p.strategy)
        eps, b_eps = p.examples_per_s, b.examples_per_s if b else None
        speedup = eps / b_eps if eps and b_eps else None
        rows.append(replace(p, speedup=speedup,
                            efficiency=speedup / p.n_devices if speedup else None))
    return rows


def _fmt_rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def scaling_efficiency(
    strategy: str,
    rows: Sequence[ThroughputPoint],
    kind: str,
    *,
    gradient_bytes: int,
    busbw_bytes_per_s: float | None,
    batch_per_device: int,
    variables_on: str,
) -> Finding:
    """Did adding devices make ``strategy`` faster, and what explains the time lost?

    ``rows``: this strategy's scaling_rows, each optionally with ``input_wait_fraction``
    (from its trace). ``busbw_bytes_per_s``: the best bus bandwidth the collective probe
    measured (None when it did not run).
    """
    check_id = f"scaling.efficiency.{strategy}"
    mine = sorted((r for r in rows if r.strategy == strategy), key=lambda r: r.n_devices)
    base = next((r for r in mine if r.n_devices == 1), None)
    multi = [r for r in mine if r.n_devices > 1]
    if base is None or not base.examples_per_s or not base.step_s:
        return Finding(check_id, "skip", f"{strategy}: no 1-device throughput to compare with",
                       {"rows": [asdict(r) for r in mine]},
                       title=title(f"{strategy}: no 1-device throughput to compare with",
                                   "no 1-device throughput to compare with"))
    if not multi:
        return Finding(check_id, "skip",
                       f"{strategy}: only one device count ran, nothing to compare",
                       {"rows": [asdict(r) for r in mine]},
                       title=title(f"{strategy}: only one device count ran",
                                   "only one device count ran"))
    costs = _GradientCost(gradient_bytes, busbw_bytes_per_s, batch_per_device)
    found = _Shortfalls()
    per_n = [_per_device_count(r, base, costs, found) for r in multi]
    if strategy == "towers" and variables_on == "cpu" and kind not in SHARED_DEVICE_KINDS \
            and found.below:
        found.causes.append("the variables live on the CPU: every tower reads them across PCIe "
                            "and every update is computed there")
        found.fixes.append("variables on the first device (--variables-on device)")
    listing = ", ".join(
        f"{counted(e['n_devices'], 'device')} {_fmt_rate(e['examples_per_s'])} ex/s "
        f"(x{e['speedup']:.2f}, efficiency {e['efficiency']:.2f})"
        if e["efficiency"] is not None else f"{counted(e['n_devices'], 'device')}: n/a"
        for e in per_n)
    evidence = {"device_kind": kind, "base_examples_per_s": base.examples_per_s,
                "base_step_s": base.step_s, "per_device_count": per_n,
                "gradient_bytes": gradient_bytes, "busbw_bytes_per_s": busbw_bytes_per_s,
                "batch_per_device": batch_per_device, "variables_on": variables_on,
                "causes": found.causes}
    head = f"{strategy}: 1 device {_fmt_rate(base.examples_per_s)} ex/s; {listing}"
    return _efficiency_finding(check_id, kind, head, found, evidence)


@dataclass(frozen=True)
class _GradientCost:
    """What the all-reduce of one step costs: gradient size, measured bus bandwidth (None
    when the collective probe did not run) and the per-device batch it is amortised over."""

    gradient_bytes: int
    busbw_bytes_per_s: float | None
    batch_per_device: int


@dataclass
class _Shortfalls:
    """Filled per device count: the counts below threshold, their causes, the fixes."""

    below: list[str] = field(default_factory=list)
    causes: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)


def efficiency_against(r: ThroughputPoint, base: ThroughputPoint) -> stats.Against | None:
    """``r``'s efficiency with its interval against its threshold: the ratio of the two
    configurations' median step times at 95 % (gpudiag.verdicts.stats.ratio_ci, over each
    one's timed steps) scales the efficiency; a point where either has too few steps.
    None: no efficiency."""
    if r.efficiency is None:
        return None
    threshold = efficiency_threshold(r.n_devices)
    ci = stats.ratio_ci(r.timed_step_s, base.timed_step_s) \
        if r.timed_step_s and base.timed_step_s else None
    if ci is None:
        return stats.against(r.efficiency, None, threshold)
    point = statistics.median(base.timed_step_s) / statistics.median(r.timed_step_s)
    return stats.against(r.efficiency, (r.efficiency * ci[0] / point,
                                        r.efficiency * ci[1] / point), threshold,
                         "95 % CI from the two configurations' step times")


def _per_device_count(
    r: ThroughputPoint, base: ThroughputPoint, costs: _GradientCost, found: _Shortfalls
) -> dict[str, Any]:
    """One device count's evidence entry; when it does not scale clearly at or above its
    threshold (its efficiency's interval, efficiency_against), adds it and what explains
    the loss to ``found``."""
    n, eff = r.n_devices, r.efficiency
    base_step_s = base.step_s or 0.0
    threshold = efficiency_threshold(n)
    a = efficiency_against(r, base)
    busbw = costs.busbw_bytes_per_s
    comm_s = allreduce_lower_bound_s(costs.gradient_bytes, n, busbw or 0.0)
    step_s = r.step_s or 0.0
    lost_s = max(0.0, step_s - base_step_s)
    explained = min(1.0, comm_s / lost_s) if lost_s > 0 and busbw else None
    entry = {"n_devices": n, "examples_per_s": r.examples_per_s,
             "speedup": r.speedup, "efficiency": eff, "ok_threshold": threshold,
             "step_s": step_s, "lost_s_per_step": lost_s,
             "allreduce_lower_bound_s": comm_s if busbw else None,
             "communication_explains_fraction": explained,
             "input_wait_fraction": r.input_wait_fraction,
             "against": a.to_dict() if a else None}
    if a is not None and a.side == stats.ABOVE:
        return entry
    if a is not None and a.near:
        found.below.append(f"{counted(n, 'device')} {eff:.2f}, " + a.words("{:.2f}"))
    else:
        found.below.append(f"{counted(n, 'device')} {eff:.2f} (ok from {threshold:.2f})"
                           if eff is not None else f"{counted(n, 'device')}: no throughput")
    if explained is not None:
        found.causes.append(
            f"at {counted(n, 'device')} the all-reduce of {costs.gradient_bytes / 2**20:.2f} MiB "
            f"of gradients needs at least {comm_s * 1e3:.2f} ms per step, "
            f"{pct(explained)} of the {lost_s * 1e3:.2f} ms lost per step")
    wait = r.input_wait_fraction
    if wait is not None and wait > INPUT_WAIT_CAUSE_FRACTION:
        found.causes.append(f"at {counted(n, 'device')} {pct(wait)} of the traced steps "
                            "waited for input")
        found.fixes.append("prefetch (dataset.prefetch(tf.data.AUTOTUNE)), parallel map "
                           "calls, cache decoded data")
    if step_s > 0 and comm_s / step_s > AVERAGING_CAUSE_FRACTION:
        found.causes.append(f"at {counted(n, 'device')} gradient averaging alone takes at least "
                            f"{pct(comm_s / step_s)} of a step: a per-device batch of "
                            f"{costs.batch_per_device} is too small for the gradient size")
        found.fixes.append("a bigger per-device batch (--batch-per-device)")
    return entry


def _efficiency_finding(
    check_id: str, kind: str, head: str, found: _Shortfalls, evidence: dict[str, Any]
) -> Finding:
    """The efficiency finding: not meaningful on shared devices, ok, or below threshold
    with the causes measured and the fixes they suggest."""
    strategy = check_id.rsplit(".", 1)[-1]
    last = max(evidence["per_device_count"], key=lambda e: e["n_devices"])
    at = (f"{counted(last['n_devices'], 'device')} x{last['speedup']:.2f}, efficiency "
          f"{last['efficiency']:.2f}" if last["efficiency"] is not None else
          f"{counted(last['n_devices'], 'device')}: no throughput")
    if kind in SHARED_DEVICE_KINDS:
        what = "virtual CPU devices" if kind == "virtual-cpu" else "logical GPUs split from one"
        return Finding(
            check_id, "warn",
            f"{head}. Not meaningful: these are {what} sharing the same cores, so more "
            "devices cannot add compute" + ("; the numbers describe those devices, not a "
                                            "property of your GPUs" if kind == "virtual-cpu"
                                            else ""),
            evidence,
            title=title(f"{strategy}: {at}; shared cores, not meaningful",
                        f"{strategy}: shared cores: scaling not meaningful",
                        "devices share cores: scaling not meaningful"),
            advice="Run on a machine with several physical GPUs to measure scaling; here the "
                   "run checks only that multi-device training works and every device did work.",
        )
    if not found.below:
        return Finding(check_id, "ok", f"{head}: every device count scales at or above its "
                       "threshold", evidence,
                       title=title(f"{strategy} scales: {at}", f"scales: {at}",
                                   "every device count scales at or above its threshold"))
    causes, fixes = found.causes, found.fixes
    why = ("; ".join(causes) + ".") if causes else (
        "None of the causes gpudiag measures (input waits, averaging cost, variable "
        "placement) explains it.")
    advice = ("Try " + "; ".join(dict.fromkeys(fixes)) + ".") if fixes else (
        "Open the profile of the slowest configuration in TensorBoard (Profile tab, "
        "trace viewer) and compare the devices' busy time.")
    return Finding(check_id, "warn",
                   f"{head}: below threshold at {', '.join(found.below)}. {why}", evidence,
                   advice=advice,
                   title=title(f"{strategy} scales below threshold: {at}",
                               f"below threshold: {at}",
                               f"scales below threshold at {len(found.below)} device count(s)"))


def device_work(
    config: str,
    devices: Sequence[str],
    ops_by_device: dict[str, int] | None,
    trace_busy_s: dict[str, float] | None,
    *,
    trace_window_s: float | None = None,
    trace_reason: str | None = None,
    placement_reason: str | None = None,
) -> Finding:
    """Every compute device of one configuration did work: by placement and by trace.

    ``ops_by_device``: ops of the traced step per device (None: not inspected).
    ``trace_busy_s``: busy seconds per device in the profiled window (None: no trace,
    ``trace_reason`` says why).
    """
    check_id = f"scaling.devices-worked.{config}"
    evidence: dict[str, Any] = {"devices": list(devices), "ops_by_device": ops_by_device,
                                "trace_busy_s": trace_busy_s, "trace_window_s": trace_window_s,
                                "trace_reason": trace_reason,
                                "placement_reason": placement_reason}
    no_ops = [d for d in devices if ops_by_device and not ops_by_device.get(d)]
    no_busy = [d for d in devices if trace_busy_s is not None and not trace_busy_s.get(d)]
    sources = []
    if ops_by_device:
        sources.append("placement: " + ", ".join(f"{d} {counted(ops_by_device.get(d, 0), 'op')}"
                                                 for d in devices))
    if trace_busy_s is not None:
        window = f" of a {trace_window_s * 1e3:.1f} ms window" if trace_window_s else ""
        sources.append("trace: " + ", ".join(f"{d} busy {trace_busy_s.get(d, 0.0) * 1e3:.1f} ms"
                                             for d in devices) + window)
    if no_ops or no_busy:
        idle = list(dict.fromkeys(no_ops + no_busy))
        parts = []
        if no_ops:
            parts.append(f"no ops placed on {', '.join(no_ops)}")
        if no_busy:
            parts.append(f"no work in the trace on {', '.join(no_busy)}")
        return Finding(check_id, "fail",
                       f"{config}: {', '.join(idle)} did no work ({'; '.join(parts)})",
                       evidence,
                       title=title(f"{config}: {', '.join(idle)} did no work",
                                   f"{config}: {len(idle)} device(s) did no work",
                                   f"{len(idle)} device(s) did no work"),
                       advice="Each tower's ops must be under tf.device(<its device>) and the "
                              "batch split across all towers; with MirroredStrategy pass every "
                              "device to the strategy.")
    if not sources:
        return Finding(check_id, "skip",
                       f"{config}: neither placement nor a trace could be inspected"
                       + (f" ({trace_reason})" if trace_reason else ""), evidence,
                       title=title(f"{config}: no placement or trace to inspect",
                                   "no placement or trace to inspect"))
    tail = f" (no trace: {trace_reason})" if trace_busy_s is None and trace_reason else ""
    if not ops_by_device and placement_reason:
        tail += f" (placement not inspected: {placement_reason})"
    return Finding(check_id, "ok",
                   f"{config}: every device did work; " + "; ".join(sources) + tail, evidence,
                   title=title(f"{config}: all {len(devices)} device(s) did work",
                               f"all {len(devices)} device(s) did work"))


def towers_vs_mirrored(rows: Sequence[ThroughputPoint]) -> Finding:
    """Throughput of the hand-written towers beside MirroredStrategy at each device count."""
    by = {(r.strategy, r.n_devices): r.examples_per_s for r in rows}
    counts = sorted({n for s, n in by if s in ("towers", "mirrored")})
    pairs = []
    for n in counts:
        t, m = by.get(("towers", n)), by.get(("mirrored", n))
        if t and m:
            pairs.append({"n_devices": n, "towers_examples_per_s": t,
                          "mirrored_examples_per_s": m, "towers_over_mirrored": t / m})
    if not pairs:
        return Finding("scaling.towers-vs-mirrored", "skip",
                       "towers and mirrored did not both run at any device count",
                       {"rows": [asdict(r) for r in rows]},
                       title="towers and mirrored did not both run at any device count")
    text = "; ".join(f"{p['n_devices']} device(s): towers {p['towers_examples_per_s']:,.0f} vs "
                     f"mirrored {p['mirrored_examples_per_s']:,.0f} ex/s "
                     f"(x{p['towers_over_mirrored']:.2f})" for p in pairs)
    slower = [p for p in pairs if p["n_devices"] > 1
              and p["towers_over_mirrored"] < TOWERS_SLOWER_RATIO]
    evidence = {"pairs": pairs, "warn_below_ratio": TOWERS_SLOWER_RATIO}
    top = pairs[-1]
    ratio = f"x{top['towers_over_mirrored']:.2f} at {top['n_devices']} device(s)"
    if slower:
        return Finding("scaling.towers-vs-mirrored", "warn",
                       f"the tower code is slower than MirroredStrategy: {text}", evidence,
                       title=f"hand-written towers slower than MirroredStrategy: {ratio}",
                       advice="MirroredStrategy all-reduces with NCCL on GPUs and overlaps it; "
                              "prefer it, or put the tower variables on a device "
                              "(--variables-on device) and average with fewer ops.")
    return Finding("scaling.towers-vs-mirrored", "ok", f"side by side: {text}", evidence,
                   title=f"towers against MirroredStrategy: {ratio}")


def allreduce_bandwidth(result: AllreduceResult, kind: str) -> Finding:
    """The collective probe's table: time, algorithm and bus bandwidth per message size."""
    rows, n, ops = result.rows, result.n_devices, result.cross_device_ops
    if not rows:
        return Finding("scaling.allreduce", "skip",
                       f"no all-reduce measured ({n} device(s): nothing to reduce across)",
                       result.to_dict(), title=f"no all-reduce measured on {n} device(s)")
    best = max(rows, key=lambda r: r.busbw_bytes_per_s)
    largest = max(rows, key=lambda r: r.size_bytes)
    text = (f"all-reduce over {n} devices with {ops}: peak bus bandwidth "
            f"{best.busbw_bytes_per_s / 1e9:.2f} GB/s at {best.size_bytes / 2**20:g} MiB; "
            f"{largest.size_bytes / 2**20:g} MiB in {largest.time_s * 1e3:.1f} ms "
            f"(busbw {largest.busbw_bytes_per_s / 1e9:.2f} GB/s)")
    evidence = {"n_devices": n, "cross_device_ops": ops, "device_kind": kind,
                "rows": [r.to_dict() for r in rows],
                "peak_busbw_bytes_per_s": best.busbw_bytes_per_s}
    if kind == "virtual-cpu":
        text += ("; these are virtual CPU devices in one process, so the numbers are "
                 "host-memory numbers, not an interconnect's")
    elif kind == "virtual-gpu":
        text += "; logical GPUs split from one GPU: this is that GPU's memory, not a link"
    return Finding("scaling.allreduce", "ok", text, evidence,
                   title=title(f"all-reduce over {n} devices: peak bus bandwidth "
                               f"{best.busbw_bytes_per_s / 1e9:.2f} GB/s",
                               f"all-reduce peak bus bandwidth "
                               f"{best.busbw_bytes_per_s / 1e9:.2f} GB/s"))
