"""A process's training loops as run.learning judges them (pure): consecutive fits of one
model joined into one training run, and a fit's per-epoch losses where its batches were
not seen."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from gpudiag.records.run import StepSeries


def epoch_losses(s: StepSeries) -> tuple[list[float], int]:
    """A fit's finite per-epoch losses and the steps they cover (fit's ``steps`` per epoch
    times the epochs, when fit said it): what there is when its batches were not seen."""
    if s.kind != "fit":
        return [], 0
    losses = [float(e["loss"]) for e in s.epochs
              if isinstance(e.get("loss"), int | float) and math.isfinite(e["loss"])]
    per_epoch = (s.facts.get("params") or {}).get("steps")
    return losses, per_epoch * len(losses) if isinstance(per_epoch, int) else 0


def training_runs(series: Sequence[StepSeries]) -> list[StepSeries]:
    """The loops as training runs: consecutive fits of the same model (a notebook fitting
    one epoch a call) are one, their steps and epochs in order. Judged apart, each short
    fit compares its first batch's loss with its epoch's running mean, which says nothing
    (a model learning over three one-epoch fits read as stuck in the first)."""
    out: list[StepSeries] = []
    for s in series:
        prev = out[-1] if out else None
        model = s.facts.get("model_id") if s.kind == "fit" else None
        if prev is not None and model is not None and prev.kind == "fit" and \
                prev.facts.get("model_id") == model:
            first = str(prev.facts.get("first_fit") or prev.label)
            calls = int(prev.facts.get("fit_calls") or 1) + 1
            out[-1] = replace(prev, label=f"{first} to #{s.label.rsplit('#', 1)[-1]} (one "
                                          f"model fitted {calls} times)",
                              steps=[*prev.steps, *s.steps], epochs=[*prev.epochs, *s.epochs],
                              facts={**prev.facts, "fit_calls": calls, "first_fit": first})
        else:
            out.append(s)
    return out
