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
from gpudiag.records.run import ProcessObservation, PyWarning

LEARNING_WARNINGS = frozenset({"from-logits-on-softmax", "gradients-missing"})
# A loss "settled" at a floor only when this many of its last losses (and its last
# quarter) are all there.
SETTLED_TAIL = 3
SETTLED_BAND = 0.05


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
