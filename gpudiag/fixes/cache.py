"""``.cache()`` after the Dataset.map at the advised line: the map's elements made in the
first epoch and kept in memory, every later epoch reading them back instead of mapping
again. Tried only where the diagnosis advises it: an in-memory source
(``from_tensor_slices``, ``from_tensors``) read for more than one epoch, its map drawing no
random numbers and running no Python gpudiag cannot see into after no shuffle
(gpudiag.verdicts.pipeline.cache_freezes refuses the others). The same elements in the same
order: what the model computes does not change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, at_line, call_span, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("cache", label="cache", changes=".cache() after the Dataset.map at the line",
          advice="call .cache() after the map", applies_to="result")
SUFFIX = ".cache()"


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    """The first map recorded at the line, where no cache follows it there."""
    at = calls_at(calls, where)
    maps = [c for c in at if c.method == "map"]
    if not maps or any(c.method == "cache" for c in at):
        return None
    return TrialFix(FIX.name, "map", maps[0].file, maps[0].line)


def rewrite(code: str, fix: TrialFix) -> str | None:
    span = call_span(code, "map")
    if span is None:
        return None
    return f"{code[:span[1] + 1]}{SUFFIX}{code[span[1] + 1:]}"


def apply(dataset: Any, fix: TrialFix) -> Any:
    """The dataset the map made, cached in memory."""
    return dataset.cache()


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded calls show a cache made on the map's dataset."""
    outputs = {c.output for c in at_line(calls, fix.file, fix.line, "map") if c.output}
    return any(c.method == "cache" and c.input in outputs for c in calls)
