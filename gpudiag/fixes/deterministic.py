"""``deterministic=False`` on a parallel Dataset.map: its elements handed on in the order
they are ready, not the order they came in, so one slow element no longer holds up the
ones made after it. Not advised by the diagnosis: offered where its pipeline, at a line a
bottleneck action names, already maps in parallel (``num_parallel_calls`` set) and keeps
the order (``deterministic`` not False). The order of the examples can change, and with it
the batches and what the model computes: the loss at matching steps is compared."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, add_argument, at_line, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("deterministic", label="deterministic=False",
          changes="deterministic=False passed to the parallel Dataset.map at the line",
          advice=None, can_change_results=True)  # offered (offer()), not an action's advice
ARGUMENT = "deterministic=False"


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    """The first parallel map recorded at ``where`` that keeps its order."""
    for c in calls_at(calls, where, "map"):
        args = c.args or {}
        if args.get("num_parallel_calls") is not None and args.get("deterministic") is not False:
            return TrialFix(FIX.name, "map", c.file, c.line)
    return None


def offer(wheres: Sequence[str | None], calls: Sequence[Call]) -> TrialFix | None:
    """The fix at the first of the bottleneck's lines whose map is parallel and ordered."""
    return next((f for w in wheres if (f := choose(w, calls, None)) is not None), None)


def rewrite(code: str, fix: TrialFix) -> str | None:
    return add_argument(code, "map", ARGUMENT)


def apply(kwargs: dict[str, Any], fix: TrialFix) -> dict[str, Any]:
    return {**kwargs, "deterministic": False}


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded map at the line had deterministic=False."""
    return any((c.args or {}).get("deterministic") is False
               for c in at_line(calls, fix.file, fix.line, "map"))
