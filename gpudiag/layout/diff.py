"""`gpudiag diff A B`'s record: what report.json keeps under ``data.diff`` (DIFF_DATA_KEY),
and what the dashboard's side-by-side view reads; part of gpudiag.layout.

Times in seconds. A median carries its distribution-free interval at CI_LEVEL
(gpudiag.verdicts.stats: None where a side has too few steps for one); a ratio is B / A
with its interval, and ``verdict`` "no change" when that interval holds 1.00. Each loop's
``level`` records the intervals' level (version 1 records, without it: CI_LEVEL).
``DiffRecord.from_dict( r.to_dict()) == r``; DIFF_VERSION counts changes of this shape
(2: ``level``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpudiag.layout.units import CI_LEVEL  # the intervals' level, declared in gpudiag.layout.units

DIFF_DATA_KEY = "diff"
DIFF_VERSION = 2


@dataclass(frozen=True)
class Median:
    median_s: float
    low_s: float | None  # the median's interval at CI_LEVEL (None: too few steps)
    high_s: float | None
    steps: int


@dataclass(frozen=True)
class LoopDiff:
    """One loop (a fit, a step function, a scaling configuration) on both sides."""

    name_a: str
    name_b: str
    a: Median
    b: Median
    ratio: float  # median B / median A
    ratio_low: float | None
    ratio_high: float | None
    verdict: str  # "faster" | "slower" | "no change" | "unknown" (no interval)
    examples_per_s_a: float | None = None
    examples_per_s_b: float | None = None
    loss_steps_matched: int = 0  # steps with a loss on both sides
    loss_a_last: float | None = None  # at the last matched step
    loss_b_last: float | None = None
    loss_max_rel_diff: float | None = None  # largest |B - A| / |A| over matched steps
    level: float = CI_LEVEL  # of the medians' and the ratio's intervals


@dataclass(frozen=True)
class PartDiff:
    device: str
    part: str  # one of gpudiag.layout.evidence.STEP_PARTS
    a_s: float
    b_s: float


@dataclass(frozen=True)
class BottleneckDiff:
    """A bottleneck finding on both sides (run.bottleneck, explain.bottleneck[...],
    scaling.bottleneck.<config>, cluster.bottleneck.<config>)."""

    finding_a: str
    finding_b: str
    before: str | None  # the cause named first (None: no bottleneck stood out)
    after: str | None
    outcome: str  # "fixed" | "moved" | "still there" | "none" | "appeared" | "unsteady"
    step_a_s: float | None  # the mean profiled step
    step_b_s: float | None
    parts: list[PartDiff] = field(default_factory=list)
    changed_most: str | None = None  # the part whose time changed most, "device part"
    predicted: dict[str, Any] | None = None  # A's evidence.predicted
    predicted_step_s: float | None = None  # A's median step scaled by the prediction
    measured_step_s: float | None = None  # B's median step
    error: float | None = None  # measured / predicted - 1
    # the prediction B is held to, with its interval scaled as predicted_step_s: for the
    # change B made where A's prediction has one for it (held_to says which)
    predicted_low_s: float | None = None
    predicted_high_s: float | None = None
    inside: bool | None = None  # B's median step within [low, high]
    held_to: str | None = None  # "parallel + prefetch" (B's change), or "every fix"
    load_note: str | None = None  # the machine's load that makes the comparison weak
    # a side whose profiled window is not its steady state (its window waited for input
    # longer than its steady steps take whole: e.g. B's first epoch filling a cache): its
    # bottleneck describes that phase, so the two are not compared
    unsteady: str | None = None


@dataclass(frozen=True)
class ScalingDiff:
    strategy: str
    n_devices: int
    efficiency_a: float | None
    efficiency_b: float | None


@dataclass(frozen=True)
class DiffRecord:
    a: str  # the run directories
    b: str
    command_a: str
    command_b: str
    loops: list[LoopDiff] = field(default_factory=list)
    bottlenecks: list[BottleneckDiff] = field(default_factory=list)
    scaling: list[ScalingDiff] = field(default_factory=list)
    devices_a: list[str] = field(default_factory=list)
    devices_b: list[str] = field(default_factory=list)
    findings_appeared: list[str] = field(default_factory=list)  # "id: status" not ok in B only
    findings_gone: list[str] = field(default_factory=list)  # not ok in A, ok or absent in B
    not_compared: list[str] = field(default_factory=list)  # what could not be, and why
    version: int = DIFF_VERSION

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DiffRecord:
        def loop(x: dict[str, Any]) -> LoopDiff:
            return LoopDiff(**{**x, "a": Median(**x["a"]), "b": Median(**x["b"])})

        def neck(x: dict[str, Any]) -> BottleneckDiff:
            return BottleneckDiff(**{**x, "parts": [PartDiff(**p) for p in x["parts"]]})
        return cls(**{**d, "loops": [loop(x) for x in d["loops"]],
                      "bottlenecks": [neck(x) for x in d["bottlenecks"]],
                      "scaling": [ScalingDiff(**x) for x in d["scaling"]]})
