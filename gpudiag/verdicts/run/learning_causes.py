"""Causes of a loss that stops where it should not, beyond ln(classes) (pure).

- **Probabilities read as logits**: a softmax cross-entropy given softmax outputs as its
  logits cannot go below ln(1 + (C-1)/e): with C classes and a one-hot probability
  vector p, softmax(p) puts e / (e + C - 1) on the right class (1.4612 for 10 classes).
  A loss that settles there, and never went below it, says so. C comes from evidence
  (gpudiag.run.classcount), never guessed.
- **What Keras warned**: the Python warnings the hooks recorded (gpudiag.inprogram.pywarnings)
  that the catalogue knows as learning problems (from_logits=True on a softmax's output,
  variables without gradients), with the program's line that led to them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.catalogue import Entry, match_lines
from gpudiag.layout.events import PyWarning
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Status
from gpudiag.verdicts import stats

LEARNING_WARNINGS = frozenset({"from-logits-on-softmax", "gradients-missing"})
# A loss "settled" at a floor only when this many of its last losses (and its last
# quarter) are all there.
SETTLED_TAIL = 3
SETTLED_BAND = 0.05
# the thresholds run.learning holds the loss's level to (gpudiag.verdicts.run.progress)
LN_TOLERANCE = 0.02  # within this fraction of ln(k) is "at ln k"
STUCK_FRACTION = 0.97  # a level at or above this share of where it started: not falling


def softmax_floor(classes: int) -> float:
    """The least softmax cross-entropy of probabilities taken for logits (C classes)."""
    return math.log(1 + (classes - 1) / math.e)


def at_softmax_floor(losses: Sequence[float], last: float, classes: int | None,
                     tolerance: float) -> float | None:
    """The floor when the loss settled on it: the last loss within ``tolerance`` of it, the
    whole tail of the series (its last quarter, at least SETTLED_TAIL losses) within
    SETTLED_BAND of it, no loss ever below it by more than ``tolerance``; else None. A
    loss still falling steeply that passes through the floor at the program's end has not
    settled there; one creeping down onto it, as it does when it cannot go lower, has."""
    if not classes or classes < 2 or len(losses) < SETTLED_TAIL:
        return None
    floor = softmax_floor(classes)
    tail = losses[-max(SETTLED_TAIL, len(losses) // 4):]
    if abs(last - floor) <= tolerance * floor and min(losses) >= floor * (1 - tolerance) \
            and all(abs(x - floor) <= SETTLED_BAND * floor for x in tail):
        return floor
    return None


@dataclass(frozen=True)
class Warned:
    entry: Entry
    warning: PyWarning

    def describe(self) -> str:
        where = ""
        frame = self.warning.user_frame
        if frame:
            where = f" (after {frame['file'].rsplit('/', 1)[-1]}:{frame['line']})"
        first = self.warning.message.strip().strip('"').splitlines()[0][:200]
        return f"{self.warning.category}: {first}{where}"

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.entry.id, "text": self.warning.text[:500],
                "user_frame": self.warning.user_frame}


def learning_warnings(obs: ProcessObservation) -> list[Warned]:
    """The recorded warnings the catalogue knows as learning problems, once per entry."""
    out: dict[str, Warned] = {}
    for w in obs.py_warnings:
        for m in match_lines([w.text]):
            if m.entry.id in LEARNING_WARNINGS and m.entry.id not in out:
                out[m.entry.id] = Warned(m.entry, w)
    return list(out.values())


def said(warned: Sequence[Warned]) -> str:
    """The learning finding's sentence about what Keras warned."""
    return "Keras warned: " + "; ".join(f"{w.describe()}: {w.entry.meaning}" for w in warned)


def advice(warned: Sequence[Warned], floor: bool, general: str) -> str:
    """The fixes: each warning's, the floor's, then the general advice."""
    parts = [w.entry.fix for w in warned]
    if floor:
        parts.append("Probabilities taken for logits: drop the last softmax and keep "
                     "from_logits=True (or tf.nn.*_with_logits), or keep it and use "
                     "from_logits=False.")
    return " ".join([*parts, general]).strip()


# ------------------------------------------------ is it learning: intervals, not points
# "Not learning" is judged from where the loss ends against ln(classes) (the loss of
# uniform predictions) and the accuracy against chance, each a measured value with its
# interval (gpudiag.verdicts.stats.against): never from the first losses, whose mean
# swung a random-label program between "stuck" and "falling" from run to run (issue 37).
TAIL_FRACTION = 4  # the loss's level: its last quarter (at least SETTLED_TAIL losses)
CHANCE_MARGIN = 0.1  # accuracy within this share of the way from chance to 1 is chance


def batch_losses(s: StepSeries) -> list[float] | None:
    """A Keras fit's own batch losses, from the running means its callbacks are given
    (each the mean over the epoch so far: batch k's loss is k m_k - (k-1) m_(k-1)); the
    running mean of a run's end hides nothing of its level but shows no spread. None: not
    a fit, or rows that are not one batch each (steps_per_execution, rows aggregated past
    the first 20,000), or values that cannot be running means of a loss (a batch below 0
    from means at or above 0)."""
    if s.kind != "fit" or not s.steps:
        return None
    out: list[float] = []
    prev = None
    k, mean = 0, 0.0
    for st in s.steps:
        if st.loss is None or not math.isfinite(st.loss) or st.count != 1:
            return None
        if prev is None or st.epoch != prev.epoch or st.index != prev.index + 1:
            k, mean = 0, 0.0  # a new epoch (or the next fit of the same model)
        k += 1
        out.append(k * st.loss - (k - 1) * mean)
        mean, prev = st.loss, st
    if min(out) < 0 <= min(st.loss for st in s.steps if st.loss is not None):
        return None
    return out


def epoch_starts(s: StepSeries) -> list[int]:
    """A Keras fit's steps (as its step series indexes them) where an epoch after the first
    began: where each loss, a running mean over its epoch so far, starts again."""
    if s.kind != "fit":
        return []
    return [st.index for prev, st in zip(s.steps, s.steps[1:], strict=False)
            if st.epoch is not None and prev.epoch is not None and st.epoch != prev.epoch]


def tail_level(losses: Sequence[float]) -> tuple[float, tuple[float, float], str]:
    """Where the loss ends: the median of its last quarter, with that median's interval
    (gpudiag.verdicts.stats.spread) and what the interval is."""
    tail = list(losses[-max(SETTLED_TAIL, len(losses) // TAIL_FRACTION):])
    level = stats.spread(tail)
    if level is None:
        raise ValueError("no losses to judge")
    med, interval, what = level
    return med, interval, f"{what} last losses"  # "95 % CI of the median of 24 last losses"


def chance_threshold(classes: int) -> float:
    """The accuracy at or under which a classifier of ``classes`` is at chance."""
    return 1 / classes + CHANCE_MARGIN * (1 - 1 / classes)


def accuracy_against_chance(accuracy: float, examples: int | None,
                            classes: int) -> stats.Against:
    """The accuracy with its interval over the ``examples`` it was measured on (Wilson;
    a point when their number is unknown) against chance_threshold: BELOW is at chance."""
    ci = stats.proportion_ci(accuracy * examples, examples) if examples else None
    return stats.against(accuracy, ci, chance_threshold(classes),
                         f"95 % CI over {examples} examples" if ci else "one value")


def last_epoch_examples(steps: Sequence[Any], batch_size: int | None) -> int | None:
    """Examples of the last epoch's batches (what a Keras accuracy is the mean over)."""
    if not batch_size or not steps:
        return None
    last = steps[-1].epoch
    return batch_size * sum(st.count for st in steps if st.epoch == last)


@dataclass(frozen=True)
class Level:
    """Where the loss ends (tail_level): the median, its interval, what the interval is."""

    value: float
    interval: tuple[float, float]
    interval_from: str


@dataclass(frozen=True)
class Judgement:
    """A training run's cause (None: learning), its status and the words said of it."""

    cause: str | None
    status: Status
    words: str


def judge(level: Level, below_ln: stats.Against | None, falling: stats.Against,
          chance: stats.Against | None, classes: int | None, floor: float | None,
          accuracy: float | None) -> Judgement:
    """The judgement of one run from its measured values against their thresholds:
    ``below_ln`` the level against ln(classes) less LN_TOLERANCE, ``falling`` against
    STUCK_FRACTION of where the loss started, ``chance`` the accuracy against chance.
    Not learning (fail): the level clear at or above ln(classes) and the accuracy not
    above chance (without an accuracy: the level's interval within the tolerance of
    ln(classes)). An interval across any line: a warn "near the threshold"."""
    lo, hi = level.interval
    if floor:
        return Judgement("softmax-floor", "fail", (
            f", settled at {floor:.4f} = ln(1 + {(classes or 0) - 1}/e), the least a softmax "
            "cross-entropy reaches when it is given probabilities as logits (the outputs "
            "went through a softmax twice)"))
    ln = math.log(classes) if classes else None
    above = ln is not None and below_ln is not None and below_ln.side == stats.ABOVE
    in_band = above and ln is not None and hi <= (1 + LN_TOLERANCE) * ln
    if above and (in_band if chance is None else chance.side != stats.ABOVE):
        # one cause, one status; the words say where the level lies: at ln(classes) (its
        # interval reaches the band) or far above it (worse than uniform predictions)
        where = f"stuck at ln {classes} = {ln:.4f} or above" \
            if ln is not None and lo <= (1 + LN_TOLERANCE) * ln else \
            f"far above ln {classes} = {ln:.4f}, worse than uniform predictions"
        return Judgement("not-learning", "fail", (
            f", {where} (median {level.value:.4f}, {lo:.4f}-{hi:.4f}: "
            f"{level.interval_from}): not learning, the model predicts no better than all "
            f"{classes} classes alike"))
    near: list[str] = []
    if below_ln is not None and below_ln.near:
        near.append(f"the loss against ln {classes} less {LN_TOLERANCE:.0%}: "
                    + below_ln.words("{:.4f}"))
    elif above and chance is not None:
        near.append(f"the loss {level.value:.4f} is not below ln {classes} = {ln:.4f}, yet "
                    f"the accuracy {accuracy:.3f} is above chance")
    elif above and ln is not None and lo <= (1 + LN_TOLERANCE) * ln:
        near.append(f"the loss against ln {classes} and {LN_TOLERANCE:.0%}: " + stats.against(
            level.value, level.interval, (1 + LN_TOLERANCE) * ln,
            level.interval_from).words("{:.4f}"))
    if chance is not None and chance.near:
        near.append("the accuracy against chance: " + chance.words("{:.3f}"))
    if not near and falling.near and (chance is None or chance.side != stats.BELOW):
        near.append(f"the loss against {STUCK_FRACTION:.0%} of where it started: "
                    + falling.words("{:.4f}"))
    if near:
        return Judgement("near-threshold", "warn", ", " + "; ".join(near))
    if chance is not None and chance.side == stats.BELOW:
        return Judgement("chance", "warn", "")
    if falling.side == stats.ABOVE:
        return Judgement("not-falling", "warn", ", not falling")
    return Judgement(None, "ok", "")
