"""``reduce_retracing=True`` given to the ``tf.function`` the diagnosis found retracing, at
its decorator's line: TensorFlow generalises the traced shapes (a dimension that changed
becomes None) instead of tracing again for each new shape. The same ops on the same
values: what the model computes does not change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, add_argument
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("reduce-retracing", label="reduce_retracing",
          changes="reduce_retracing=True given to the tf.function made at the line",
          advice="reduce_retracing=True")  # applies to tf.function's keyword arguments
METHOD = "function"  # tf.function, called at the decorator's line


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    """The tf.function defined at ``where`` (its first decorator's line, where Python
    calls tf.function): no recorded call needed, the diagnosis found it there."""
    if not where or ":" not in where:
        return None
    file, _, line = where.rpartition(":")
    return TrialFix(FIX.name, METHOD, file, int(line)) if line.isdigit() else None


def rewrite(code: str, fix: TrialFix) -> str | None:
    """``@tf.function`` -> ``@tf.function(reduce_retracing=True)``; a call already there
    gets the argument."""
    stripped = code.rstrip()
    if stripped.lstrip().startswith("@") and stripped.endswith("function"):
        return f"{stripped}(reduce_retracing=True){code[len(stripped):]}"
    return add_argument(code, METHOD, "reduce_retracing=True")


def apply(kwargs: dict[str, Any], fix: TrialFix) -> dict[str, Any]:
    return {**kwargs, "reduce_retracing": True}


def made(fix: TrialFix, calls: Sequence[Call]) -> bool | None:
    """Not recorded by the hooks (tf.function's arguments are not an event): not known."""
    return None
