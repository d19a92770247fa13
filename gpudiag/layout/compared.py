"""The typed evidence of the findings that compare two measures (the records and decode
are gpudiag.layout.evidence's): diff's step time (``DiffStep``, A's and B's ``MedianStep``),
scaling's efficiency (``Scaling``, each device count's ``ScalingPoint``) and `gpudiag try`'s
fix measured against the program as written (``TriedFix``). Pure: imports
gpudiag.layout.evidencefields and gpudiag.layout.units only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.layout.evidencefields import dur, integer, items, num, obj, text, texts
from gpudiag.layout.units import CI_LEVEL


# --------------------------------------------------------------------------- DiffStep
@dataclass(frozen=True)
class MedianStep:
    """A side's median step (seconds) with its interval at ``level`` (None: too few
    steps) and the steps it is the median of."""

    median_s: float
    low_s: float | None
    high_s: float | None
    steps: int

    @classmethod
    def from_dict(cls, data: Any, side: str) -> MedianStep:
        where = f"{side}."
        d = obj(data, side)
        median = dur(d, "median_s", where, required=True)
        assert median is not None
        return cls(median, dur(d, "low_s", where), dur(d, "high_s", where),
                   integer(d, "steps", where) or 0)


@dataclass(frozen=True)
class DiffStep:
    """diff.step-time.<loop>'s evidence (gpudiag.layout.diff.LoopDiff): A's and B's
    median step, B / A with its interval at ``level`` (a report written before the level
    was recorded: CI_LEVEL, the only one gpudiag has used), and the verdict (faster,
    slower, no change, unknown)."""

    name_a: str
    name_b: str
    a: MedianStep
    b: MedianStep
    ratio: float
    ratio_low: float | None
    ratio_high: float | None
    verdict: str
    level: float = CI_LEVEL

    @property
    def speedup(self) -> float:
        """A / B: how many times faster B is (below 1: slower)."""
        return 1 / self.ratio

    @classmethod
    def from_dict(cls, data: Any) -> DiffStep:
        d = obj(data, "evidence")
        ratio = num(d, "ratio", "", required=True)
        assert ratio is not None
        verdict = text(d, "verdict", "")
        if verdict not in ("faster", "slower", "no change", "unknown"):
            raise ValueError(f"evidence field verdict is not a verdict: {verdict!r}")
        return cls(text(d, "name_a", "") or "", text(d, "name_b", "") or "",
                   MedianStep.from_dict(d.get("a"), "a"), MedianStep.from_dict(d.get("b"), "b"),
                   ratio, num(d, "ratio_low", ""), num(d, "ratio_high", ""), verdict,
                   num(d, "level", "") or CI_LEVEL)


# ---------------------------------------------------------------------------- Scaling
@dataclass(frozen=True)
class ScalingPoint:
    n_devices: int
    examples_per_s: float | None
    speedup: float | None
    efficiency: float | None
    ok_threshold: float | None
    step_s: float | None

    @classmethod
    def from_dict(cls, data: Any, i: int) -> ScalingPoint:
        where = f"per_device_count[{i}]."
        d = obj(data, where.rstrip("."))
        n = integer(d, "n_devices", where)
        if n is None:
            raise ValueError(f"evidence field {where}n_devices is missing")
        return cls(n, num(d, "examples_per_s", where), num(d, "speedup", where),
                   num(d, "efficiency", where), num(d, "ok_threshold", where),
                   dur(d, "step_s", where))


@dataclass(frozen=True)
class Scaling:
    """scaling.efficiency.<strategy>'s evidence: the 1-device base and each larger device
    count (none: nothing to compare, the finding says why)."""

    device_kind: str | None = None
    base_examples_per_s: float | None = None
    base_step_s: float | None = None
    per_device_count: tuple[ScalingPoint, ...] = ()
    causes: tuple[str, ...] = ()

    @classmethod
    def from_dict(cls, data: Any) -> Scaling:
        d = obj(data, "evidence")
        return cls(text(d, "device_kind", ""), num(d, "base_examples_per_s", ""),
                   dur(d, "base_step_s", ""),
                   tuple(ScalingPoint.from_dict(x, i)
                         for i, x in enumerate(items(d, "per_device_count", ""))),
                   texts(d, "causes", ""))


# --------------------------------------------------------------------------- TriedFix
@dataclass(frozen=True)
class TriedFix:
    """try.fix.<fix>'s evidence (gpudiag.verdicts.trial): the fix, its line as written and
    as it would be, B/A (the median over rounds of each round's fixed median step over the
    same round's as-written one) with its interval from the rounds' spread, the prediction
    as a ratio with its interval and whether the measurement fell inside it, whether the
    hooks' record shows the change made, the exception where the fix broke it, and for a
    fix that can change results the loss at matching steps (gpudiag.verdicts.trial_loss)."""

    fix: str
    where: str | None
    as_written: str | None
    as_it_would_be: str | None
    verdict: str  # faster, slower, no change, cannot tell, broke, not compiled
    ratio: float | None = None
    ratio_low: float | None = None
    ratio_high: float | None = None
    rounds: int = 0
    level: float = CI_LEVEL
    predicted_ratio: float | None = None
    predicted_low: float | None = None
    predicted_high: float | None = None
    inside: bool | None = None
    applied: bool | None = None
    can_change_results: bool = False
    broke: str | None = None
    loss_steps: int = 0  # the steps whose loss matched (0: not compared)
    loss_rel_diff: float | None = None  # the largest relative difference, fix against A
    loss_own_rel_diff: float | None = None  # A against itself across rounds

    @classmethod
    def from_dict(cls, data: Any) -> TriedFix:
        d = obj(data, "evidence")
        verdict = text(d, "verdict", "")
        if verdict not in ("faster", "slower", "no change", "cannot tell", "broke",
                           "not compiled"):
            raise ValueError(f"evidence field verdict is not a verdict: {verdict!r}")
        flags = {k: d.get(k) for k in ("inside", "applied")}
        for k, v in flags.items():
            if v is not None and not isinstance(v, bool):
                raise ValueError(f"evidence field {k} is not true or false")
        return cls(text(d, "fix", "") or "", text(d, "where", ""), text(d, "as_written", ""),
                   text(d, "as_it_would_be", ""), verdict, num(d, "ratio", ""),
                   num(d, "ratio_low", ""), num(d, "ratio_high", ""),
                   integer(d, "rounds", "") or 0, num(d, "level", "") or CI_LEVEL,
                   num(d, "predicted_ratio", ""), num(d, "predicted_low", ""),
                   num(d, "predicted_high", ""), flags["inside"], flags["applied"],
                   bool(d.get("can_change_results")), text(d, "broke", ""),
                   integer(d, "loss_steps", "") or 0, num(d, "loss_rel_diff", ""),
                   num(d, "loss_own_rel_diff", ""))
