"""``steps_per_execution`` four times the advised N, passed to the same ``Model.compile``:
the issue's "the value advised, and one larger", tried beside steps_per_execution.py's N
(the per-call overhead paid once for 4N steps; a batch-level callback sees one batch in
4N). Everything but the value is steps_per_execution.py's. No prediction is made for it
(the diagnosis's is for N), so none is held to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from gpudiag.fixes import steps_per_execution as advised
from gpudiag.fixes.lines import Call
from gpudiag.records.trial import TrialFix

# the action's prediction is the advised N's, not this one's
FIX = replace(advised.FIX, name="steps-per-execution-larger", predicted=False,
              changes="steps_per_execution=4N (four times the advised N) passed to the "
                      "Model.compile")
FACTOR = 4

rewrite = advised.rewrite
apply = advised.apply
made = advised.made
steps_per_call = advised.steps_per_call


def choose(where: str | None, calls: Sequence[Call], predicted: Mapping[str, Any] | None
           ) -> TrialFix | None:
    fix = advised.choose(where, calls, predicted)
    return None if fix is None else replace(fix, name=FIX.name,
                                            value=(fix.value or advised.DEFAULT_N) * FACTOR)
