"""`scaling.bottleneck.<config>`: run.bottleneck's breakdown and classification for one
scaling configuration, and, with several devices, where the lost speed-up went.

Pure: the configuration's gpudiag.readers.steprecords.Breakdown (or why there is none)
and, for the comparison, the mean step of the same strategy on one device. The
classification is gpudiag.verdicts.bottleneck.bottleneck itself (the function `run` and
`explain` use), under this configuration's id.

The probe keeps the batch per device fixed (the global batch grows with the devices), so
perfect scaling keeps the step period of one device: every second a replica's step takes
beyond it is speed-up lost. The breakdown's parts add up to the period, so the growth of
each part, replica mean against one device, says where it went: per-replica compute
(replicas sharing the hardware: virtual devices on one GPU or one CPU's cores), collective
communication (the all-reduce), input, host, and idle (a replica waiting while another
worked: waiting for the slowest). The replicas' start skew is stated where the trace
has it (GPU traces' per-device Steps lines); a CPU trace has no per-replica step marks.

On virtual CPU devices (no GPU: `gpudiag scaling` splits the CPU) the devices take turns
on the same cores and their all-reduce is a copy in host memory: whatever the breakdown
shows (communication, idle, compute growing with the devices) describes those devices, not
the user's GPUs. The finding says so first, names no all-reduce or communication fix, and
is ok (on_shared_cores): the classification is kept, for what it shows of the workload.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpudiag.layout.units import duration
from gpudiag.readers.steprecords import Breakdown, StepParts
from gpudiag.report import Finding
from gpudiag.verdicts.bottleneck import ProgramFacts, bottleneck
from gpudiag.verdicts.common import title
from gpudiag.verdicts.step_parts import PARTS, mean_parts, parts_seconds, working

CHECK_PREFIX = "scaling.bottleneck."
WHERE = {"compute": "per-replica compute", "communication": "communication (all-reduce)",
         "copy": "host-device copies", "input": "input", "host": "host",
         "idle": "idle (waiting while another device worked)"}


@dataclass(frozen=True)
class ConfigTrace:
    """One configuration's trace as the verdict takes it: its name, its breakdown (or why
    there is none), the replica devices judged, how many devices (or workers) it ran on,
    and the gradient bytes per replica per step (the all-reduce's bandwidth; None:
    unknown)."""

    name: str
    breakdown: Breakdown | None
    reason: str | None
    replicas: Sequence[str]
    n_devices: int
    gradient_bytes: int | None = None
    device_kind: str | None = None  # DeviceSetup.kind: gpu | virtual-gpu | virtual-cpu


@dataclass(frozen=True)
class Baseline:
    """The same strategy on one device (or worker): (name, mean step), or why there is
    none; the finding ids' prefix and the unit ("device", or "worker" for `scaling
    --workers`)."""

    base: tuple[str, StepParts] | None = None
    reason: str | None = None
    check_prefix: str = CHECK_PREFIX
    unit: str = "device"


def judged_mean(b: Breakdown, replicas: Sequence[str]) -> StepParts | None:
    """The mean step over the devices run.bottleneck judges (the replicas)."""
    return mean_parts(working(b, replicas))


def lost_speedup(mine: StepParts, base: StepParts, n_devices: int,
                 skew_s: float | None) -> dict[str, Any]:
    """Where the speed-up over one device went: each part's growth per step, in seconds,
    largest first (a part that shrank is negative), and the speed-up the trace gives
    (``n_devices`` x base period / this period)."""
    growth = {k: getattr(mine, f"{k}_s") - getattr(base, f"{k}_s") for k in PARTS}
    return {"n_devices": n_devices, "step_s": mine.period_s, "base_step_s": base.period_s,
            "lost_s_per_step": mine.period_s - base.period_s,
            "speedup_by_trace": n_devices * base.period_s / mine.period_s
            if mine.period_s > 0 else None,
            "growth_s": dict(sorted(growth.items(), key=lambda kv: -kv[1])),
            "replica_skew_s": skew_s}


def lost_text(lost: dict[str, Any], base_name: str, unit: str = "device") -> str:
    n = lost["n_devices"]
    head = (f"lost speed-up: {duration(lost['step_s'])} per step against "
            f"{duration(lost['base_step_s'])} on 1 {unit} ({base_name}), "
            f"{lost['speedup_by_trace']:.2f}x of {n}x by the trace")
    if lost["lost_s_per_step"] <= 0:
        return head + "; nothing lost per step"
    grew = [f"{WHERE[k]} +{duration(v)}" for k, v in lost["growth_s"].items() if v > 0]
    shrank = [f"{WHERE[k]} -{duration(-v)}" for k, v in lost["growth_s"].items() if v < 0]
    text = f"{head}; the {duration(lost['lost_s_per_step'])} went to " + ", ".join(grew)
    if shrank:
        text += " (less: " + ", ".join(shrank) + ")"
    if lost["replica_skew_s"] is not None:
        text += f"; the replicas started a step up to {duration(lost['replica_skew_s'])} apart"
    return text


def scaling_bottleneck(config: ConfigTrace, baseline: Baseline | None = None) -> Finding:
    """One configuration's finding: run.bottleneck's verdict under this configuration's
    id and, with several devices, where the speed-up over ``baseline`` went."""
    baseline = baseline or Baseline()
    name, b, n_devices, unit = config.name, config.breakdown, config.n_devices, baseline.unit
    f = bottleneck(b, config.reason, ProgramFacts(
        replicas=config.replicas,
        gradient_bytes=config.gradient_bytes if n_devices > 1 else None),
        check_id=baseline.check_prefix + name)
    f = replace(f, title=title(f"{name}: {f.title}", f.title))
    if b is None:
        return replace(f, message=f"{name}: no trace to break down: {config.reason}")
    if f.status == "skip":
        return f
    if n_devices < 2 or "no-gpu-kernels" in f.evidence.get("causes", []):
        return on_shared_cores(f, config)
    mine = judged_mean(b, config.replicas)
    assert mine is not None  # bottleneck() skipped otherwise
    if baseline.base is None:
        why = baseline.reason or f"no 1-{unit} configuration of this strategy"
        return on_shared_cores(replace(
            f, message=f"{f.message}; where the speed-up went: not compared ({why})",
            evidence={**f.evidence, "lost_speedup": None, "lost_speedup_reason": why}),
            config)
    base = baseline.base
    lost = lost_speedup(mine, base[1], n_devices, b.replica_skew_s)
    return on_shared_cores(replace(
        f, message=f"{f.message}; {lost_text(lost, base[0], unit)}",
        evidence={**f.evidence, "lost_speedup": lost,
                  "base": {"name": base[0], **parts_seconds(base[1])}}), config)


SHARED_CORES_ADVICE = (
    "Nothing here to fix in your program: these devices take turns on the same cores and "
    "their all-reduce is a copy in host memory, so communication and idle time grow with "
    "the devices whatever the program does. Run `gpudiag scaling` (or `gpudiag run` on "
    "your program) on the machine with the GPUs to see their bottleneck.")


def on_shared_cores(f: Finding, config: ConfigTrace) -> Finding:
    """A configuration on virtual CPU devices: said first, as what it is; ok (the numbers
    are not the user's GPUs' to fix), with no all-reduce or communication advice; every
    other kind as it is."""
    if config.device_kind != "virtual-cpu" or f.status == "skip":
        return f
    n = config.n_devices
    said = (f"{config.name} on {n} virtual CPU device{'s' if n > 1 else ''} sharing this "
            "machine's cores: the numbers describe those devices, not a property of your "
            "GPUs")
    message = f.message.split(": ", 1)[-1] if f.message.startswith(f"{config.name}: ") \
        else f.message
    cause = (f.evidence.get("causes") or ["none stands out"])[0]
    return replace(f, status="ok", message=f"{said}; {message}",
                   evidence={**f.evidence, "device_kind": "virtual-cpu",
                             "shared_cores": True},
                   advice=SHARED_CORES_ADVICE, actions=(),
                   title=title(f"{config.name}: {cause} on virtual CPUs sharing cores, not "
                               "your GPUs", f"{cause} on virtual CPUs: not your GPUs",
                               "virtual CPUs sharing cores: not your GPUs' numbers"))
