"""Verdicts from the parent's NVML sampling: was every GPU used, and what sampling cost.

Used by `gpudiag monitor` (any workload) and `gpudiag scaling` (per configuration).
Evidence: the sampler's per-device summaries (gpudiag.nvml.DeviceSummary, where a value a
device cannot report is NOT_AVAILABLE) and its SamplingResult; nothing here calls NVML.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.nvml import NOT_AVAILABLE, DeviceSummary, NotAvailable, SamplingResult, or_none
from gpudiag.report import Finding
from gpudiag.verdicts.common import gib_text, title
from gpudiag.verdicts.stats import ABOVE, BELOW, Against, against

# A run shorter than this cannot be judged from NVML's utilization (its window is up to 1 s).
MIN_JUDGED_S = 1.0


def gpu_numbers(s: DeviceSummary) -> dict[str, Any]:
    """One GPU's summary as plain numbers for evidence (None where not available)."""
    return {
        "index": s.index,
        "name": or_none(s.name),
        "pci_bus_id": or_none(s.pci_bus_id),
        "util_mean_percent": _round(s.util_mean_percent),
        "util_p50_percent": _round(s.util_p50_percent),
        "util_p95_percent": _round(s.util_p95_percent),
        "util_max_percent": _round(s.util_max_percent),
        "util_p95_ci_percent": None if s.util_p95_ci_percent is None
        else [round(v, 1) for v in s.util_p95_ci_percent],
        "util_source": s.util_source,
        "util_samples": s.util_sample_count,
        "active_s": _round(s.active_s),
        "observed_s": round(s.observed_s, 2),
        "peak_memory_used_bytes": or_none(s.peak_memory_used_bytes),
        "memory_total_bytes": or_none(s.memory_total_bytes),
        "processes": [p.pid for p in s.processes],
        "error": s.error,
        "gpm_readings": s.gpm_reading_count,
        "sm_util_mean_percent": _round(s.sm_util_mean_percent),
        "sm_occupancy_mean_percent": _round(s.sm_occupancy_mean_percent),
        "tensor_util_mean_percent": _round(s.tensor_util_mean_percent),
        "dram_bw_util_mean_percent": _round(s.dram_bw_util_mean_percent),
        "gpm_unavailable_reason": s.gpm_unavailable_reason,
    }


def _round(value: float | NotAvailable, digits: int = 1) -> float | None:
    return None if value is NOT_AVAILABLE else round(float(value), digits)


def _util_text(s: DeviceSummary) -> str:
    if s.util_p95_percent is NOT_AVAILABLE or s.util_mean_percent is NOT_AVAILABLE:
        return f"GPU {s.index}: utilization not available"
    active = ("" if s.active_s is NOT_AVAILABLE
              else f", active {s.active_s:.1f} of {s.observed_s:.1f} s")
    return (f"GPU {s.index}: mean {s.util_mean_percent:.0f} %, p95 {s.util_p95_percent:.0f} %"
            f"{active}")


def every_gpu_used(
    summaries: Sequence[DeviceSummary],
    idle_threshold_percent: float,
    *,
    nvml_unavailable_reason: str | None = None,
    expected_indices: Sequence[int] | None = None,
    check_id: str = "nvml.every-gpu-used",
) -> Finding:
    """Did every expected GPU work? From the sampler's per-device summaries.

    A GPU counts as idle when its p95 utilization stayed under ``idle_threshold_percent``
    (it worked less than 5 % of the time at most); a GPU NVML lost is a fail; a GPU whose
    utilization NVML cannot give is neither. The p95's interval (its order statistics,
    nvml.summaries.quantile_ci, from 71 samples on) is what is held against the threshold:
    a GPU whose interval crosses it is "near" (a warn naming it, never idle one run and
    used the next); with fewer samples the p95 is a point. Skip when NVML was unavailable.
    """
    if nvml_unavailable_reason is not None:
        return Finding(
            check_id, "skip",
            f"could not check that every GPU was used: NVML is not available "
            f"({nvml_unavailable_reason})",
            {"reason": nvml_unavailable_reason},
            title="no NVML: whether every GPU was used is not checked",
            advice="Run where the NVIDIA driver is installed (libnvidia-ml.so.1); "
                   "`gpudiag env` says what NVML reports.",
        )
    judged = [s for s in summaries if expected_indices is None or s.index in expected_indices]
    evidence: dict[str, Any] = {
        "idle_threshold_percent": idle_threshold_percent,
        "expected_indices": None if expected_indices is None else list(expected_indices),
        "gpus": [gpu_numbers(s) for s in summaries],
    }
    if not judged:
        return Finding(check_id, "skip", "no GPU was sampled, so none can be judged", evidence,
                       title="no GPU was sampled, so none can be judged")
    groups = _GpuGroups.of(judged, idle_threshold_percent)
    evidence.update(idle_indices=[s.index for s in groups.idle],
                    worked_indices=[s.index for s in groups.worked],
                    near_indices=[s.index for s in groups.near],
                    lost_indices=[s.index for s in groups.lost],
                    no_utilization_indices=[s.index for s in groups.blind])
    verdict = _Verdict(check_id, idle_threshold_percent, groups, evidence)
    found = _lost_or_idle_finding(verdict)
    return found if found is not None else _worked_finding(verdict)


@dataclass(frozen=True)
class _GpuGroups:
    """The judged GPUs sorted by what NVML saw of them."""

    judged: list[DeviceSummary]
    lost: list[DeviceSummary]  # NVML lost the device
    blind: list[DeviceSummary]  # no utilization reading
    idle: list[DeviceSummary]  # p95 utilization under the threshold, its interval too
    worked: list[DeviceSummary]  # p95 utilization at or over the threshold, its interval too
    near: list[DeviceSummary]  # the p95's interval across the threshold

    @classmethod
    def of(cls, judged: list[DeviceSummary], idle_threshold_percent: float) -> _GpuGroups:
        read = [s for s in judged if s.error is None and s.util_p95_percent is not NOT_AVAILABLE]
        side = {s.index: p95_against(s, idle_threshold_percent).side for s in read}
        return cls(
            judged=judged,
            lost=[s for s in judged if s.error is not None],
            blind=[s for s in judged if s.error is None and s.util_p95_percent is NOT_AVAILABLE],
            idle=[s for s in read if side[s.index] == BELOW],
            worked=[s for s in read if side[s.index] == ABOVE],
            near=[s for s in read if side[s.index] not in (ABOVE, BELOW)],
        )


def p95_against(s: DeviceSummary, idle_threshold_percent: float) -> Against:
    """A GPU's p95 utilization, with its interval where there are samples enough for one,
    against the idle threshold."""
    n, p95 = s.util_sample_count, s.util_p95_percent
    assert p95 is not NOT_AVAILABLE  # only GPUs with a reading are judged
    return against(p95, s.util_p95_ci_percent, idle_threshold_percent,
                   f"95 % CI of the p95 of {counted(n, 'sample')}" if s.util_p95_ci_percent else "")


@dataclass(frozen=True)
class _Verdict:
    """What every_gpu_used's findings are made from."""

    check_id: str
    idle_threshold_percent: float
    groups: _GpuGroups
    evidence: dict[str, Any]


def _idle_text(s: DeviceSummary) -> str:
    held = ""
    if s.processes:
        pids = ", ".join(str(p.pid) for p in s.processes)
        held = (f"; memory held there ({gib_text(or_none(s.peak_memory_used_bytes))}, "
                f"pid {pids}) but no kernel ran")
    return (f"{s.label} stayed idle (p95 {s.util_p95_percent:.0f} %, max "
            f"{s.util_max_percent:.0f} % over {s.observed_s:.1f} s{held})")


def _lost_or_idle_finding(v: _Verdict) -> Finding | None:
    """The finding when a GPU was lost or stayed idle; None when neither."""
    g, check_id, evidence = v.groups, v.check_id, v.evidence
    if g.lost:
        lost_text = "; ".join(f"{s.label} failed: {s.error}" for s in g.lost)
        return Finding(
            check_id, "fail",
            lost_text + (f"; {len(g.worked)} other GPU(s) kept working" if g.worked else ""),
            evidence,
            title=title(f"{len(g.lost)} GPU(s) lost ({', '.join(s.label for s in g.lost)})",
                        f"{len(g.lost)} GPU(s) lost during the run"),
            advice="A lost GPU (NVMLError_GpuIsLost) needs a reset or a reboot; check "
                   "`nvidia-smi -q` and the kernel log (dmesg: Xid errors).",
        )
    if g.idle and g.worked:
        used = ", ".join(str(s.index) for s in g.worked)
        return Finding(
            check_id, "fail",
            f"only GPU(s) {used} of {len(g.judged)} worked: "
            + "; ".join(_idle_text(s) for s in g.idle)
            + " - while " + "; ".join(_util_text(s) for s in g.worked),
            evidence,
            title=title(f"only GPU(s) {used} of {len(g.judged)} worked; "
                        f"{len(g.idle)} stayed idle",
                        f"only {len(g.worked)} of {len(g.judged)} GPUs worked"),
            advice="The workload put no work on the idle GPU(s). With TensorFlow, distribute "
                   "it (tf.distribute.MirroredStrategy, or one tower per GPU under tf.device) "
                   "and check with `gpudiag placement`; if only some GPUs are meant to be "
                   "used, hide the others with CUDA_VISIBLE_DEVICES (or watch only those "
                   "with --gpus).",
        )
    longest = max(s.observed_s for s in g.judged)
    if g.idle and longest < MIN_JUDGED_S:
        return Finding(
            check_id, "warn",
            f"the run lasted {longest:.1f} s, too short to tell idle GPUs from busy ones "
            f"(NVML's utilization window is up to 1 s); no GPU reached "
            f"{v.idle_threshold_percent:g} %",
            evidence,
            title=f"a {longest:.1f} s run is too short to tell idle GPUs from busy ones",
            advice="Watch a run of a few seconds at least.",
        )
    if g.idle and not g.near:
        return Finding(
            check_id, "fail",
            f"no GPU was used: all {len(g.idle)} stayed under {v.idle_threshold_percent:g} % "
            f"utilization (" + "; ".join(_util_text(s) for s in g.idle) + ")",
            evidence,
            title=f"no GPU was used: all {len(g.idle)} stayed under "
                  f"{v.idle_threshold_percent:g} % utilization",
            advice="The workload ran without touching the GPUs: check that the framework "
                   "sees them (`gpudiag env`) and where ops were placed (`gpudiag placement`).",
        )
    if g.near:
        return _near_finding(v)
    return None


def _near_finding(v: _Verdict) -> Finding:
    """Some GPU's p95 utilization sits near the idle threshold (its interval across it):
    one warn, whichever side its p95 fell on this time."""
    g = v.groups
    near = "; ".join(
        f"{s.label}: " + p95_against(s, v.idle_threshold_percent).words(
            lambda x: f"{x:.0f} %", "p95 utilization") for s in g.near)
    others = []
    if g.idle:
        others.append("idle: " + "; ".join(_idle_text(s) for s in g.idle))
    if g.worked:
        others.append("worked: " + "; ".join(_util_text(s) for s in g.worked))
    return Finding(
        v.check_id, "warn",
        near + (" - " + "; ".join(others) if others else ""),
        v.evidence,
        title=title(f"GPU(s) {', '.join(str(s.index) for s in g.near)} near the idle "
                    f"threshold ({v.idle_threshold_percent:g} % at p95)",
                    f"{len(g.near)} GPU(s) near the idle threshold"),
        advice="The GPU worked a little: at most a few % of the time over the idle line. "
               "If it should carry a share of the work, check where the ops run "
               "(`gpudiag placement`) and the strategy's devices; watch a longer run to "
               "decide.",
    )


def _worked_finding(v: _Verdict) -> Finding:
    """The finding when no GPU was lost or idle: every GPU worked, or some had no reading."""
    g, check_id, evidence = v.groups, v.check_id, v.evidence
    if g.blind and not g.worked:
        return Finding(
            check_id, "skip",
            "NVML gives no utilization for " + ", ".join(s.label for s in g.blind)
            + ", so whether they worked cannot be told",
            evidence,
            title=f"NVML gives no utilization for {len(g.blind)} GPU(s): not judged",
        )
    message = (f"every GPU worked (at least {v.idle_threshold_percent:g} % utilization at p95): "
               + "; ".join(_util_text(s) for s in g.worked))
    if g.blind:
        return Finding(
            check_id, "warn",
            message + "; no utilization reading for " + ", ".join(s.label for s in g.blind),
            evidence,
            title=f"{len(g.worked)} GPU(s) worked; {len(g.blind)} give no utilization",
            advice="NVML does not report utilization for those devices (e.g. MIG instances, "
                   "some virtual GPUs); check them another way.",
        )
    return Finding(check_id, "ok", message, evidence,
                   title=f"every GPU worked: {len(g.worked)} of {len(g.judged)} at least "
                         f"{v.idle_threshold_percent:g} % busy")


def nvml_sampling(
    backend: str | None, reason: str | None, interval_s: float,
    result: SamplingResult | None, *, check_id: str = "nvml.sampling",
) -> Finding:
    """Whether NVML sampling ran, what it cost, and what the devices could not report."""
    if result is None:
        return Finding(
            check_id, "skip", f"NVML sampling skipped: {reason}", {"reason": reason},
            title="NVML sampling skipped: no driver-side view of the GPUs",
            advice="Without NVML there is no driver-side view of the GPUs; install the NVIDIA "
                   "driver where there is a GPU.",
        )
    cost = result.cost
    missing = {s.index: list(s.unavailable_fields) for s in result.summaries
               if s.unavailable_fields}
    evidence = {"backend": backend, "interval_s": interval_s, "cost": cost.to_dict(),
                "unavailable_fields": missing, "sampler_error": result.sampler_error}
    text = (f"sampled {len(result.summaries)} GPU(s) every {interval_s:g} s for "
            f"{result.duration_s:.1f} s ({cost.polls} polls, "
            f"{len(result.util_samples)} driver utilization samples); the sampler used "
            f"{cost.cpu_fraction:.2%} of one CPU core, {cost.poll_wall_mean_s * 1000:.2f} ms "
            f"per poll")
    if result.sampler_error is not None:
        return Finding(check_id, "fail", f"the NVML sampler stopped early: "
                       f"{result.sampler_error}", evidence,
                       title="the NVML sampler stopped early",
                       advice="Report this as a gpudiag bug with the evidence.")
    if cost.cpu_fraction > 0.05:
        return Finding(check_id, "warn", text + ": more than 5 %", evidence,
                       title=f"NVML sampling cost {cost.cpu_fraction:.1%} of a core, over 5 %",
                       advice="Use a longer --interval.")
    if missing:
        text += "; not available: " + "; ".join(
            f"GPU {i}: {', '.join(f)}" for i, f in missing.items())
    return Finding(check_id, "ok", text, evidence,
                   title=f"NVML sampled {len(result.summaries)} GPU(s) every {interval_s:g} s "
                         f"for {result.duration_s:.1f} s")
