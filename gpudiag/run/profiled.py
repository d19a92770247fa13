"""A process's profiled window (parent side, no TensorFlow): its trace's busy time per
device (trace_of, each op attributed to the device TensorFlow placed it on) and why its
steps are slow (why_slow: run.bottleneck, from gpudiag.readers.stepbreakdown).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudiag.readers import stepbreakdown, traces
from gpudiag.readers.placementlog import PlacementRow
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Finding
from gpudiag.run import eagertrace
from gpudiag.run.placedrows import op_devices
from gpudiag.run.windowfacts import judged_devices, window_facts
from gpudiag.verdicts import bottleneck
from gpudiag.verdicts.run import hostcauses


def trace_of(obs: ProcessObservation, rows: list[PlacementRow]
             ) -> tuple[traces.TraceSummary | None, str | None]:
    p = obs.profile
    if p is None or p.status in ("failed", "skipped"):
        return None, (p.error if p else "no profiler window")
    files = traces.find_xplanes(Path(p.logdir))
    if not files:
        return None, f"no .xplane.pb under {p.logdir}"
    try:
        summary = traces.summarize(files[-1], op_devices(rows, obs), judged_devices(obs))
        return summary, None
    except traces.TraceError as exc:
        return None, str(exc)


def why_slow(obs: ProcessObservation, rows: list[PlacementRow], proc: str,
             nvml_gpus: list[dict[str, Any]] | None = None, warmup: int = 10) -> Finding:
    """run.bottleneck: the profiled window's steps broken down (gpudiag.readers.stepbreakdown),
    read with what the program did around the window (gpudiag.run.windowfacts) and how full
    NVML's GPM saw the process's GPUs (``nvml_gpus``: gpu_numbers)."""
    p = obs.profile
    check_id = f"run.bottleneck{proc}"
    if p is None or p.status in ("failed", "skipped"):
        return bottleneck.bottleneck(None, p.error if p else "no profiler window",
                                     check_id=check_id)
    files = traces.find_xplanes(Path(p.logdir))
    if not files:
        return bottleneck.bottleneck(None, f"no .xplane.pb under {p.logdir}", check_id=check_id)
    series = next((s for s in obs.series if s.label == p.source), None)
    if series is not None and series.kind == "eager":
        eager = hostcauses.eager_facts(obs, series, warmup) or {}
        eager["fix"] = hostcauses.eager_fix(eager) if eager else None
        try:
            split = eagertrace.eager_split(files[-1])
        except traces.TraceError as exc:
            return bottleneck.bottleneck(None, str(exc), check_id=check_id)
        return bottleneck.eager(split, bottleneck.ProgramFacts(loop=p.source, eager=eager),
                                check_id=check_id)
    window = window_facts(obs, rows, p, series, warmup, nvml_gpus)
    try:
        result = stepbreakdown.breakdown(files[-1], window.op_devices, window.devices)
    except traces.TraceError as exc:
        return bottleneck.bottleneck(None, str(exc), check_id=check_id)
    return bottleneck.bottleneck(result, None, window.facts, check_id=check_id)
