"""`cluster.bottleneck.<config>`: a local cluster configuration's profiled steps broken down.

In sync mode only the coordination leader (the chief, else worker 0) runs the profiler
(gpudiag/train/multiworker.py: TensorFlow's profiler aborted the other workers), so
each configuration has one trace, the leader's own process: its steps (the same step
markers as `scaling`) split into compute / communication / input / host / idle by
gpudiag.readers.stepbreakdown, judged by gpudiag.verdicts.scaling_bottleneck against the
same mode and batch on 1 worker (the batch per worker is fixed: perfect scaling keeps
the leader's step period). The other workers' steps are not in it, so no skew between
workers is claimed. Parameter-server mode runs no profiler: a skip says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpudiag.cluster.clusterrun import ClusterRun
from gpudiag.readers import stepbreakdown, traces
from gpudiag.readers.steprecords import Breakdown, StepParts
from gpudiag.records.cluster import WorkerResult
from gpudiag.report import Finding
from gpudiag.verdicts.scaling_bottleneck import (
    Baseline,
    ConfigTrace,
    judged_mean,
    scaling_bottleneck,
)

CHECK_PREFIX = "cluster.bottleneck."
PS_REASON = "parameter-server mode runs no profiler (only sync trainers trace their steps)"


def breakdown_of(run: ClusterRun) -> tuple[Breakdown | None, str | None, list[str]]:
    """The leader's trace broken down (or why there is none) and the devices judged (none
    named: the child records no op placement, so the trace's ops are one host row; a
    GPU trace has its device planes)."""
    chief = run.chief
    result: WorkerResult | None = chief.result if chief is not None else None
    if run.mode != "sync":
        return None, PS_REASON, []
    if result is None:
        return None, f"the leader task left no result ({run.outcome})", []
    if not result.profile_dir:
        return None, "no profiler window (--profile-steps 0, or the run ended first)", []
    files = traces.find_xplanes(Path(result.profile_dir))
    if not files:
        return None, f"no .xplane.pb under {result.profile_dir}", []
    try:  # no placement: every op on the process's own row (/host:CPU), judged as such
        return stepbreakdown.breakdown(files[-1]), None, []
    except traces.TraceError as exc:
        return None, str(exc), []


def findings(runs: Sequence[ClusterRun]) -> list[Finding]:
    """One finding per configuration, in run order (the 1-worker ones first)."""
    out = []
    base: dict[tuple[str, int], tuple[str, StepParts] | None] = {}
    base_reason: dict[tuple[str, int], str] = {}
    for run in runs:
        b, reason, replicas = breakdown_of(run)
        key = (run.mode, run.batch_per_worker)
        if run.n_workers == 1:
            mean = judged_mean(b, replicas) if b is not None else None
            base[key] = (run.name, mean) if mean is not None and mean.period_s > 0 else None
            if base[key] is None:
                base_reason[key] = f"{run.name} has no trace: {reason}" if b is None \
                    else f"{run.name}'s trace holds no complete step"
        out.append(scaling_bottleneck(
            ConfigTrace(run.name, b, reason, replicas, run.n_workers),
            Baseline(base.get(key), base_reason.get(key, f"no 1-worker {run.mode} run at "
                                                         "this batch"),
                     check_prefix=CHECK_PREFIX, unit="worker")))
    return out
