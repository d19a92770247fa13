"""Keras ``steps_per_execution=N`` passed to the advised ``Model.compile``: N training steps
run in one call of the step function, the per-call overhead paid once for N. The updates
are the same; the program's own callbacks' batch hooks see one batch in N, so the model
computes the same, and what a batch-level callback logs is coarser."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, add_argument, at_line, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("steps-per-execution", label="steps_per_execution",
          changes="steps_per_execution=N passed to the Model.compile at the line",
          advice="pass steps_per_execution=N to compile()")
DEFAULT_N = 16  # gpudiag.verdicts.whatif's STEPS_PER_EXECUTION


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    compiles = calls_at(calls, where, "compile")
    if not compiles:
        return None
    inputs = (predicted or {}).get("inputs") or {}
    n = inputs.get("steps_per_execution")
    return TrialFix(FIX.name, "compile", compiles[0].file, compiles[0].line,
                    n if isinstance(n, int) and n > 1 else DEFAULT_N)


def rewrite(code: str, fix: TrialFix) -> str | None:
    return add_argument(code, "compile", f"steps_per_execution={fix.value or DEFAULT_N}")


def apply(kwargs: dict[str, Any], fix: TrialFix) -> dict[str, Any]:
    return {**kwargs, "steps_per_execution": fix.value or DEFAULT_N}


def steps_per_call(fix: TrialFix) -> int:
    """The training steps one call of the step function runs with the fix (the trial's
    warm-up and stop are counted in such calls)."""
    return fix.value or DEFAULT_N


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded compile at the line had the fix's steps_per_execution."""
    return any((c.args or {}).get("steps_per_execution") == (fix.value or DEFAULT_N)
               for c in at_line(calls, fix.file, fix.line, "compile"))
