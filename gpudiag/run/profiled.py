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
from gpudiag.verdicts import allreduce, bottleneck, gpu_fill
from gpudiag.verdicts.run import hostcauses
from gpudiag.verdicts.run import throughput as run_throughput


def trace_of(obs: ProcessObservation, rows: list[PlacementRow]
             ) -> tuple[traces.TraceSummary | None, str | None]:
    p = obs.profile
    if p is None or p.status in ("failed", "skipped"):
        return None, (p.error if p else "no profiler window")
    files = traces.find_xplanes(Path(p.logdir))
    if not files:
        return None, f"no .xplane.pb under {p.logdir}"
    devices = [d for s in obs.strategies for d in s.worker_devices] or \
        [d for d in (obs.devices.logical if obs.devices else []) if ":GPU:" in d]
    try:
        summary = traces.summarize(files[-1], op_devices(rows, obs),
                                   list(dict.fromkeys(devices)))
        return summary, None
    except traces.TraceError as exc:
        return None, str(exc)


def why_slow(obs: ProcessObservation, rows: list[PlacementRow], proc: str,
             nvml_gpus: list[dict[str, Any]] | None = None, warmup: int = 10) -> Finding:
    """run.bottleneck: the profiled window's steps broken down (gpudiag.readers.stepbreakdown),
    with how full NVML's GPM saw the process's GPUs (``nvml_gpus``: gpu_numbers)."""
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
    devices = [d for s in obs.strategies for d in s.worker_devices] or \
        [d for d in (obs.devices.logical if obs.devices else []) if ":GPU:" in d]
    try:
        result = stepbreakdown.breakdown(files[-1], op_devices(rows, obs) or None,
                                         list(dict.fromkeys(devices)))
    except traces.TraceError as exc:
        return bottleneck.bottleneck(None, str(exc), check_id=check_id)
    facts = series.facts if series else {}
    epochs = (facts.get("params") or {}).get("epochs")
    mirrored = [d for s in obs.strategies if "Mirrored" in s.class_name
                for d in s.worker_devices]
    timing = (run_throughput.loop_timing(obs, series, warmup) or {}) if series else {}
    fit_periods = run_throughput.step_times(series, warmup, p.steps) \
        if series is not None and series.kind == "fit" and timing.get("input") is None else []
    return bottleneck.bottleneck(result, None, bottleneck.ProgramFacts(
        host_causes=hostcauses.loop_causes(obs, p.source, warmup),
        compile=facts.get("compile"),
        input_series=timing.get("input"), run_periods=fit_periods,
        cpu_use=facts.get("cpu_use"),
        calls=obs.dataset_calls, loop=p.source, called_at=facts.get("called_at"),
        jit_compile=facts.get("jit_compile") is True,
        epochs=epochs if isinstance(epochs, int) else None,
        replicas=[d for s in obs.strategies for d in s.worker_devices],
        nvml_gpus=None if nvml_gpus is None else gpu_fill.gpus_of(obs.pid, nvml_gpus),
        gradient_bytes=allreduce.gradient_bytes(facts.get("trainable_bytes_by_device"),
                                                mirrored)
        or (facts.get("trainable_bytes") if mirrored else None)), check_id=check_id)
