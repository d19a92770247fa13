"""``.prefetch(tf.data.AUTOTUNE)`` at the end of the pipeline the loop consumes: the dataset
the advised line makes is handed on prefetched, so the next batch is made while this one
trains. Elements and their order are the same: what the model computes does not change."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.fixes.lines import Call, at_line, call_span, calls_at
from gpudiag.records.trial import Fix, TrialFix

FIX = Fix("prefetch", label="prefetch",
          changes=".prefetch(tf.data.AUTOTUNE) after the pipeline's last call, at the line",
          advice="end the pipeline with .prefetch(tf.data.AUTOTUNE)", applies_to="result",
          prediction="prefetch")
AUTOTUNE = -1
SUFFIX = ".prefetch(tf.data.AUTOTUNE)"


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    """The last tf.data call recorded at the line: the pipeline's end there."""
    at = [c for c in calls_at(calls, where) if c.method != "compile"]
    if not at or any(c.method == "prefetch" for c in at):
        return None
    return TrialFix(FIX.name, at[-1].method, at[-1].file, at[-1].line)


def rewrite(code: str, fix: TrialFix) -> str | None:
    span = call_span(code, fix.method)
    if span is None:
        return None
    return f"{code[:span[1] + 1]}{SUFFIX}{code[span[1] + 1:]}"


def apply(dataset: Any, fix: TrialFix) -> Any:
    """The dataset the call made, prefetched."""
    return dataset.prefetch(AUTOTUNE)


def made(fix: TrialFix, calls: Sequence[Call]) -> bool:
    """Whether the trial's recorded calls show a prefetch made on the line's dataset."""
    outputs = {c.output for c in at_line(calls, fix.file, fix.line, fix.method) if c.output}
    return any(c.method == "prefetch" and c.input in outputs for c in calls)
