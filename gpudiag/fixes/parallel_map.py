"""``num_parallel_calls=tf.data.AUTOTUNE`` on the Dataset.map at the advised line: the map's
elements made on tf.data's threads, several at a time. The order stays the program's
(``deterministic`` is left as it was: the default keeps it), so what the model computes
does not change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, add_argument, at_line, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("parallel-map", label="num_parallel_calls",
          changes="num_parallel_calls=tf.data.AUTOTUNE passed to the Dataset.map at the line",
          advice="pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
          prediction="parallel")
AUTOTUNE = -1  # tf.data.AUTOTUNE
ARGUMENT = "num_parallel_calls=tf.data.AUTOTUNE"


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    maps = calls_at(calls, where, "map")
    if not maps or (maps[0].args or {}).get("num_parallel_calls") is not None:
        return None
    return TrialFix(FIX.name, "map", maps[0].file, maps[0].line)


def rewrite(code: str, fix: TrialFix) -> str | None:
    return add_argument(code, "map", ARGUMENT)


def apply(kwargs: dict[str, Any], fix: TrialFix) -> dict[str, Any]:
    """The map's keyword arguments with num_parallel_calls=AUTOTUNE (a value the program
    gave is left alone: it is not this fix's line)."""
    if kwargs.get("num_parallel_calls") is None:
        return {**kwargs, "num_parallel_calls": AUTOTUNE}
    return kwargs


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded calls show the map at the line made in parallel."""
    return any((c.args or {}).get("num_parallel_calls") == "AUTOTUNE"
               for c in at_line(calls, fix.file, fix.line, "map"))
