"""What a profiled window's breakdown is read with, beside its trace: the device each op
was placed on, the devices judged, and what the program did around the window (its
tf.data calls and their lines, its loop, its compile, its steps over the whole run:
gpudiag.verdicts.step_causes.ProgramFacts). Parent side, no TensorFlow.

Made once, from one process's observation, for two readers: `gpudiag run` as it analyses
its own window (gpudiag.run.profiled.why_slow), and `gpudiag explain` of a run directory
(``recorded``), which reads the same observation back from the events the run saved, so
that a trace explained again is read with what its run recorded, not as a bare trace.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag.layout.events import Profile
from gpudiag.layout.run import RUN_CHILD_NAME, RUN_STDERR, RUN_TB_PREFIX
from gpudiag.readers.placementlog import PlacementRow
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.run import eventfiles
from gpudiag.run.placedrows import op_devices, placement_rows
from gpudiag.rundir import RunDirError
from gpudiag.rundir.load import read_report
from gpudiag.verdicts import allreduce, gpu_fill
from gpudiag.verdicts.run import hostcauses
from gpudiag.verdicts.run import throughput as run_throughput
from gpudiag.verdicts.step_causes import ProgramFacts

DEFAULT_WARMUP = 10  # gpudiag.run.options' default, for a run that recorded none


@dataclass(frozen=True)
class WindowFacts:
    """``op_devices``: node name -> device (None: no placement known); ``devices``: the
    devices judged (the strategy's replicas, else the GPUs TensorFlow listed)."""

    op_devices: dict[str, str] | None
    devices: list[str]
    facts: ProgramFacts


def judged_devices(obs: ProcessObservation) -> list[str]:
    """The devices the breakdown judges: the strategy's replicas, else the GPUs listed."""
    devices = [d for s in obs.strategies for d in s.worker_devices] or \
        [d for d in (obs.devices.logical if obs.devices else []) if ":GPU:" in d]
    return list(dict.fromkeys(devices))


def window_facts(obs: ProcessObservation, rows: list[PlacementRow], p: Profile,
                 series: StepSeries | None, warmup: int,
                 nvml_gpus: list[dict[str, Any]] | None = None) -> WindowFacts:
    """The placement, devices and program facts of the window ``p`` profiled in ``series``
    (its loop; None: not known), ``warmup`` steps left out of the whole run's timing."""
    facts = series.facts if series else {}
    epochs = (facts.get("params") or {}).get("epochs")
    mirrored = [d for s in obs.strategies if "Mirrored" in s.class_name
                for d in s.worker_devices]
    timing = (run_throughput.loop_timing(obs, series, warmup) or {}) if series else {}
    fit_periods = run_throughput.step_times(series, warmup, p.steps) \
        if series is not None and series.kind == "fit" and timing.get("input") is None else []
    return WindowFacts(op_devices(rows, obs) or None, judged_devices(obs), ProgramFacts(
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
        or (facts.get("trainable_bytes") if mirrored else None)))


_PROGRAM_RUN = re.compile(re.escape(RUN_TB_PREFIX) + r"(\d+)")


def recorded(trace: Path) -> WindowFacts | None:
    """What the `gpudiag run` that wrote ``trace``
    (``<run>/program-<pid>/plugins/profile/<ts>/<host>.xplane.pb``) recorded of its
    process: read back from its saved events and stderr, with the warm-up its
    run.throughput finding says it used. None: the trace is not one of a `gpudiag run`,
    or the run's events of that process cannot be read, or its window was of an eager loop
    (its own breakdown): the trace is then read bare."""
    parents = trace.parents
    if len(parents) < 5 or parents[1].name != "profile" or parents[2].name != "plugins":
        return None
    found = _PROGRAM_RUN.fullmatch(parents[3].name)
    run_dir = parents[4]
    events_dir = run_dir / "children" / RUN_CHILD_NAME
    if found is None or not events_dir.is_dir():
        return None
    observations, _bad = eventfiles.observe_all(events_dir)
    tf_procs = [o for o in observations if o.imported_tf]
    obs = next((o for o in tf_procs if o.pid == int(found.group(1))), None)
    if obs is None or obs.profile is None:
        return None
    stderr_path = events_dir / RUN_STDERR
    stderr = stderr_path.read_text(errors="replace") if stderr_path.is_file() else ""
    rows, _why = placement_rows(stderr, obs, len(tf_procs))
    p = obs.profile
    series = next((s for s in obs.series if s.label == p.source), None)
    if series is not None and series.kind == "eager":  # its own breakdown: read bare
        return None
    return window_facts(obs, rows, p, series, _warmup(run_dir))


def _warmup(run_dir: Path) -> int:
    """The warm-up steps the run left out (its run.throughput finding's evidence)."""
    try:
        findings = read_report(run_dir).get("findings") or []
    except RunDirError:
        return DEFAULT_WARMUP
    for f in findings:
        warmup = f.get("evidence", {}).get("warmup_steps") if isinstance(f, dict) else None
        if str(f.get("id", "")).startswith("run.throughput") and isinstance(warmup, int):
            return warmup
    return DEFAULT_WARMUP
