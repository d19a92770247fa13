"""The verdict of `gpudiag scaling` on learning (scaling.learning): each configuration's
loss fell clearly below ln(classes) and its accuracy rose above chance, or it did not learn.
The rest of scaling's verdicts are gpudiag.verdicts.scaling's.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.report import Finding
from gpudiag.verdicts.common import title

LEARN_LOSS_FRACTION = 0.8  # final loss must be below this x ln(classes)
LEARN_ACCURACY_GAIN = 0.10  # final accuracy >= chance + this x (1 - chance)


@dataclass(frozen=True)
class LearningRow:
    """One configuration's training outcome (a NaN loss is None)."""

    name: str
    num_classes: int
    steps: int
    final_loss: float | None  # training, mean of the last steps
    final_accuracy: float | None
    initial_loss: float | None = None
    learning_rate: float | None = None
    eval_accuracy: float | None = None
    eval_accuracy_ema: float | None = None


def learning(configs: Sequence[LearningRow]) -> Finding:
    """The loss fell clearly below ln(classes) and accuracy rose above chance, per run."""
    if not configs:
        return Finding("scaling.learning", "skip", "no training run completed", {},
                       title="no training run completed")
    failed, rows = [], []
    for c in configs:
        classes = c.num_classes
        ln_c = math.log(classes)
        chance = 1.0 / classes
        max_loss = LEARN_LOSS_FRACTION * ln_c
        min_acc = chance + LEARN_ACCURACY_GAIN * (1 - chance)
        loss, acc = c.final_loss, c.final_accuracy
        ok = loss is not None and acc is not None and loss <= max_loss and acc >= min_acc
        row = {**asdict(c), "ln_classes": ln_c, "chance_accuracy": chance,
               "max_final_loss": max_loss, "min_final_accuracy": min_acc, "learned": ok}
        rows.append(row)
        if not ok:
            loss_text = "NaN (diverged)" if loss is None else f"{loss:.4f}"
            acc_text = "n/a" if acc is None else f"{acc:.2f}"
            failed.append(f"{c.name}: loss {loss_text} (ln {classes} = {ln_c:.4f}, must fall "
                          f"below {max_loss:.2f}), accuracy {acc_text} (chance {chance:.2f}, "
                          f"must reach {min_acc:.2f}) after {counted(c.steps, 'step')}")
    evidence = {"runs": rows}
    if failed:
        return Finding(
            "scaling.learning", "fail",
            "did not learn: " + "; ".join(failed), evidence,
            title=f"{len(failed)} of {len(rows)} run(s) did not learn",
            advice="A loss stuck at ln(classes) with chance accuracy means the updates do "
                   "not reach the weights: a zero or tiny learning rate, gradients that are "
                   "None or zero (variables created outside the tape, a stop_gradient), or "
                   "an optimizer applied to a copy of the weights. A NaN loss means too "
                   "high a learning rate.",
        )
    best = ", ".join(f"{r['name']} {r['final_loss']:.3f}/{r['final_accuracy']:.2f}"
                     for r in rows)
    return Finding("scaling.learning", "ok",
                   f"every run learned (final loss/accuracy; ln {configs[0].num_classes}"
                   f" = {math.log(configs[0].num_classes):.4f}): {best}", evidence,
                   title=title(f"every run learned: final loss {_loss_range(rows)} against "
                               f"ln {configs[0].num_classes} = "
                               f"{math.log(configs[0].num_classes):.2f}",
                               f"all {counted(len(rows), 'run')} learned"))


def _loss_range(rows: Sequence[dict[str, Any]]) -> str:
    losses = [r["final_loss"] for r in rows]
    low, high = min(losses), max(losses)
    return f"{low:.3f}" if f"{low:.3f}" == f"{high:.3f}" else f"{low:.3f}-{high:.3f}"
