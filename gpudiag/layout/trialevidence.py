"""`gpudiag try`'s typed evidence: ``TriedFix`` (try.fix.<fix>), one fix measured against
the program as written, decoded from report.json's plain ``evidence`` object like every
record of gpudiag.layout.evidence, which lists it among the families' types. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpudiag.layout.evidencefields import integer, num, obj, text
from gpudiag.layout.units import CI_LEVEL


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
