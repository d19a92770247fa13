"""The profiled step's parts on the devices judged: which devices are judged (the
strategy's replicas, else those that ran kernels or ops), their mean step and each step's
mean, and the parts in words and in seconds (the evidence's plain form). Read by
gpudiag.verdicts.bottleneck and scaling_bottleneck.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.layout.evidence import STEP_PARTS
from gpudiag.layout.units import share as pct
from gpudiag.readers.steprecords import HOST_ROW, PART_FIELDS, Breakdown, DeviceBreakdown, StepParts

PARTS = STEP_PARTS  # in the order they add up (declared once in gpudiag.layout.evidence)


def working(b: Breakdown, replicas: Sequence[str] = ()) -> list[DeviceBreakdown]:
    """The devices whose steps are judged: the strategy's replicas where the trace has
    them, else those that ran kernels or ops (the row of ops the placement does not name
    only when there is no other)."""
    mine = [d for d in b.devices if d.steps and any(d.device.endswith(r) for r in replicas)]
    placed = [d for d in b.devices if d.device != HOST_ROW]  # HOST_ROW: ops placed nowhere
    rows = mine or [d for d in placed if d.steps and d.ran_kernels]
    return rows or [d for d in placed if d.steps] or [d for d in b.devices if d.steps]


def mean_parts(rows: Sequence[DeviceBreakdown]) -> StepParts | None:
    means = [m for m in (d.mean() for d in rows) if m is not None]
    if not means:
        return None
    n = len(means)

    def avg(name: str) -> float:
        return sum(getattr(m, name) for m in means) / n
    return StepParts("mean", *(avg(f) for f in PART_FIELDS))


def parts_text(m: StepParts) -> str:
    copy = f"copy {pct(m.share(m.copy_s))}, " if m.copy_s > 0 else ""
    text = (f"compute {pct(m.share(m.compute_s))}, {copy}input {pct(m.share(m.input_s))}, "
            f"communication {pct(m.share(m.communication_s))}, host {pct(m.share(m.host_s))}")
    if m.host_between_calls_s > 0:
        text += f" (Python between step calls {pct(m.share(m.host_between_calls_s))})"
    return text + f", idle {pct(m.share(m.idle_s))}"


def parts_seconds(m: StepParts) -> dict[str, float]:
    """A mean step's parts in seconds, the evidence's plain form (the picture's bars)."""
    return {"period_s": m.period_s, **{f"{k}_s": getattr(m, f"{k}_s") for k in PARTS},
            "host_between_calls_s": m.host_between_calls_s,
            "host_call_edges_s": m.host_call_edges_s, "host_python_ops_s": m.host_python_ops_s}


def step_means(rows: Sequence[DeviceBreakdown]) -> list[StepParts]:
    """Each profiled step's parts, the mean over the devices judged (those with the same
    number of steps as the first)."""
    rows = [d for d in rows if d.steps and len(d.steps) == len(rows[0].steps)]
    if not rows:
        return []
    return [StepParts(str(i), *(sum(getattr(d.steps[i], f) for d in rows) / len(rows)
                                for f in PART_FIELDS)) for i in range(len(rows[0].steps))]
