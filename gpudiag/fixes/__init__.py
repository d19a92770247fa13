"""The fixes `gpudiag try` applies in-process, at the program's own line, without editing a
file: one module each (parallel_map, prefetch, cache, deterministic, steps_per_execution
and its larger twin steps_per_execution_larger, jit_compile, reduce_retracing), declared once;
choice.py picks the advised ones it can apply (the rest: "not tried"), lines.py reads
and rewrites the program's line.

Each module declares what it is in one record, ``FIX`` (gpudiag.records.trial.Fix: its
name and label, what it changes, the advice it answers, whether it can change what the
model computes, what it applies to, the what-if prediction that sizes it alone; a fix no
action advises is offered by ``offer(wheres, calls)`` where the diagnosis's pipeline
allows it), and three functions:
``choose(action, calls, predicted)`` (the parent: the TrialFix for an advised action, or
None), ``rewrite(code)`` (the line as it would be) and ``apply`` (in the program, through
gpudiag.inprogram.trial: the call's arguments or its result changed).

Pure and light: the standard library and gpudiag.inprogram.config only (the hooks load
these into the program: gpudiag.inprogram.SHARED_MODULES)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from gpudiag.fixes import (
    cache,
    deterministic,
    jit_compile,
    parallel_map,
    prefetch,
    reduce_retracing,
    steps_per_execution,
    steps_per_execution_larger,
)
from gpudiag.fixes.lines import Call, add_argument, call_span, calls_at
from gpudiag.records.trial import TrialFix

#: Every fix `gpudiag try` can apply, in the order it tries them.
MODULES: tuple[ModuleType, ...] = (parallel_map, prefetch, cache, deterministic,
                                   steps_per_execution, steps_per_execution_larger,
                                   jit_compile, reduce_retracing)
BY_NAME: dict[str, ModuleType] = {m.FIX.name: m for m in MODULES}


@dataclass(frozen=True)
class Chosen:
    """A fix chosen for an advised action: what the hooks apply, the line as written and
    as it would be, the prediction for it alone as B/A with its interval (None: none)."""

    fix: TrialFix
    as_written: str | None
    as_it_would_be: str | None
    predicted: tuple[float, float | None, float | None] | None


def modules_of(what: str) -> list[ModuleType]:
    """The fix modules whose advice an action's ``what`` gives (steps_per_execution: the
    advised N and a larger one; empty: none applies it)."""
    return [m for m in MODULES if m.FIX.advice and m.FIX.advice in what]


def label(fix: TrialFix) -> str:
    """A fix in a few words: its module's FIX.label, with its value (``steps_per_execution=16``)."""
    module = BY_NAME[fix.name]
    return f"{module.FIX.label}={fix.value}" if fix.value is not None else module.FIX.label


def ratio_of(predicted: Mapping[str, Any] | None, now_s: float | None
             ) -> tuple[float, float | None, float | None] | None:
    """A prediction's step (and interval) as B/A against the step it was made from (the
    what-if's ``step_s_low``/``step_s_high`` or an action's ``low_s``/``high_s``)."""
    if not predicted or not now_s or not isinstance(predicted.get("step_s"), int | float):
        return None
    low = predicted.get("step_s_low", predicted.get("low_s"))
    high = predicted.get("step_s_high", predicted.get("high_s"))
    return (predicted["step_s"] / now_s,
            low / now_s if isinstance(low, int | float) else None,
            high / now_s if isinstance(high, int | float) else None)


__all__ = ["BY_NAME", "MODULES", "Call", "Chosen", "add_argument", "call_span", "calls_at",
           "label", "modules_of", "ratio_of"]
