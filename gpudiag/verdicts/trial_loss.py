"""`gpudiag try`'s loss at matching steps, for a fix that can change what the model computes
(jit_compile, deterministic=False: gpudiag.fixes' CAN_CHANGE_RESULTS). Pure: the trials'
recorded losses by training step (each trial's Keras batch logs, read back from its run
directory) in, the comparison and its words out.

In each round the fix's losses are set against the program as written's at the steps both
recorded: the largest relative difference over the rounds is the fix's. The program as
written set against itself across rounds (round 1 against round 2 ...) gives the difference
its own run-to-run variation makes (shuffles unseeded, threads' order): a fix's difference
within that is not the fix's doing, and is said as such."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

SAME = 1e-6  # a relative difference at most this: the same loss (float32's rounding)


class HasLosses(Protocol):
    @property
    def fix(self) -> str: ...
    @property
    def round(self) -> int: ...
    @property
    def losses(self) -> Mapping[int, float]: ...


@dataclass(frozen=True)
class LossCompared:
    """A fix's losses against the program as written's at matching steps: how many steps
    matched over the rounds, the largest relative difference, the program as written's own
    largest across rounds (None: fewer than two rounds of it), and the last matched step of
    the last round with both losses."""

    steps: int
    rel_diff: float
    own_rel_diff: float | None
    last_step: int
    last_a: float
    last_b: float


def _rel(a: Mapping[int, float], b: Mapping[int, float]) -> tuple[list[int], float]:
    common = sorted(set(a) & set(b))
    rels = [abs(b[s] - a[s]) / max(abs(a[s]), 1e-12) for s in common]
    return common, max(rels, default=0.0)


def compare(trials: Sequence[HasLosses], fix: str) -> LossCompared | None:
    """``fix``'s losses against the same rounds' program as written (None: no step matched:
    neither recorded a loss, a custom loop whose loss was not read)."""
    a = {t.round: t.losses for t in trials if not t.fix and t.losses}
    b = {t.round: t.losses for t in trials if t.fix == fix and t.losses}
    steps, worst, last = 0, 0.0, None
    for r in sorted(set(a) & set(b)):
        common, rel = _rel(a[r], b[r])
        if common:
            steps, worst = steps + len(common), max(worst, rel)
            last = (common[-1], a[r][common[-1]], b[r][common[-1]])
    if last is None:
        return None
    rounds = sorted(a)
    own = [_rel(a[p], a[q]) for p, q in itertools.pairwise(rounds)]
    own_rel = max((rel for common, rel in own if common), default=None)
    return LossCompared(steps, worst, own_rel, *last)


def words(c: LossCompared | None) -> str:
    """The comparison in one clause, what was observed only."""
    if c is None:
        return "the loss at matching steps was not compared: no trial pair recorded one"
    at = (f"the loss at step {c.last_step}: {c.last_a:.4g} as written, {c.last_b:.4g} with "
          "the fix")
    if c.rel_diff <= SAME:
        return f"the same loss at all {c.steps} matching steps ({at})"
    own = ("" if c.own_rel_diff is None else
           f"; the program as written differed from itself by up to {c.own_rel_diff:.2%} "
           "between rounds" + (", as much or more: not the fix's doing"
                               if c.own_rel_diff >= c.rel_diff else ""))
    return f"the loss differs by up to {c.rel_diff:.2%} over {c.steps} matching steps ({at}){own}"
