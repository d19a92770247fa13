"""`scaling.bottleneck.<config>`: each configuration's profiled steps broken down.

For every configuration, in the order run: its profiler trace (the training child's
window, ``<config>/plugins/profile/``) through gpudiag.readers.stepbreakdown with the
child's op placement and replica devices, judged by
gpudiag.verdicts.scaling_bottleneck (run.bottleneck's verdict, and where the speed-up
went against the same strategy on one device). A configuration without a trace (a
failed child, ``--profile-steps 0``, an unreadable file) gets a skip that says why.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from gpudiag.readers import stepbreakdown, traces
from gpudiag.readers.steprecords import Breakdown, StepParts
from gpudiag.records.training import TrainingResult
from gpudiag.report import Finding
from gpudiag.verdicts.scaling_bottleneck import (
    Baseline,
    ConfigTrace,
    judged_mean,
    scaling_bottleneck,
)


def profile_trace(result: TrainingResult) -> tuple[Path | None, str | None]:
    """The configuration's profiler trace file, or why there is none."""
    train = result.train
    if not train.profile_dir:
        return None, "no profiler window (--profile-steps 0)"
    files = traces.find_xplanes(Path(train.profile_dir))
    if not files:
        return None, f"no .xplane.pb under {train.profile_dir}"
    return files[-1], None


def breakdown_of(result: TrainingResult) -> tuple[Breakdown | None, str | None]:
    """The configuration's trace broken down, or why there is none."""
    path, reason = profile_trace(result)
    if path is None:
        return None, reason
    try:
        return stepbreakdown.breakdown(path, result.train.op_devices or None,
                                       result.train.devices), None
    except traces.TraceError as exc:
        return None, str(exc)


def findings(configs: Sequence[tuple[str, str, int, TrainingResult | None, str | None]]
             ) -> list[Finding]:
    """One finding per configuration: (name, strategy, devices, result or None, why the
    child gave none)."""
    out = []
    base: dict[str, tuple[str, StepParts] | None] = {}
    base_reason: dict[str, str] = {}
    for name, strategy, n, result, failed in configs:
        b: Breakdown | None
        reason: str | None
        if result is None:
            b, reason = None, f"the configuration failed ({failed or 'no result'})"
        else:
            b, reason = breakdown_of(result)
        replicas = result.train.devices if result is not None else []
        if n == 1:
            mean = judged_mean(b, replicas) if b is not None else None
            base[strategy] = (name, mean) if mean is not None and mean.period_s > 0 else None
            if base[strategy] is None:
                base_reason[strategy] = f"{name} has no trace: {reason}" if b is None \
                    else f"{name}'s trace holds no complete step"
        out.append(scaling_bottleneck(
            ConfigTrace(name, b, reason, replicas, n,
                        result.gradient_bytes if result is not None else None,
                        result.setup.kind if result is not None else None),
            Baseline(base.get(strategy),
                     base_reason.get(strategy, f"no 1-device {strategy} configuration ran"))))
    return out
