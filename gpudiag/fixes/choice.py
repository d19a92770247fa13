"""Which of the diagnosis's advised fixes `gpudiag try` applies (gpudiag.fixes' modules),
and which it lists as "not tried: change it by hand" with their prediction only. Pure: the
bottleneck finding's actions and evidence, and the calls the hooks recorded, in."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.fixes import MODULES, Chosen, modules_of, ratio_of
from gpudiag.fixes.lines import Call
from gpudiag.records.trial import TrialFix


@dataclass(frozen=True)
class NotTried:
    """An advised fix `gpudiag try` does not apply: the action's words, its line, its
    prediction as B/A (None: none) and why it is not tried."""

    what: str
    where: str | None
    predicted: tuple[float, float | None, float | None] | None
    why: str


def choose(actions: Sequence[Mapping[str, Any]], evidence: Mapping[str, Any],
           calls: Sequence[Call]) -> tuple[list[Chosen], list[NotTried]]:
    """The fixes to try, one per advised action a fix module applies at a line the hooks
    recorded (the first of each kind), then the fixes offered where the pipeline allows
    them (deterministic=False on a parallel map at a line an action names), and the
    advised actions left to the user."""
    predicted = evidence.get("predicted") or {}
    by_change = predicted.get("by_change") or {}
    now_s = evidence.get("step_s")
    chosen: list[Chosen] = []
    not_tried: list[NotTried] = []
    for action in actions:
        what, where = str(action.get("what") or ""), action.get("where")
        modules = modules_of(what)
        own = ratio_of(action.get("predicted"), now_s)
        fixes = [(m, f) for m in modules if (f := m.choose(where, calls, predicted))]
        if not fixes:
            why = ("gpudiag cannot apply it in-process" if not modules else
                   "the hooks recorded no call it applies to at that line")
            not_tried.append(NotTried(what, where, own, why))
            continue
        for module, fix in fixes:
            alone = by_change.get(module.FIX.prediction) if module.FIX.prediction else None
            mine = own if module.FIX.predicted else None
            _add(chosen, fix, module, calls,
                 ratio_of(alone, now_s) if module.FIX.prediction else mine)
    wheres = [a.get("where") for a in actions]
    for module in MODULES:
        if module.FIX.advice is None and (fix := module.offer(wheres, calls)) is not None:
            _add(chosen, fix, module, calls, None)
    return chosen, not_tried


def _add(chosen: list[Chosen], fix: TrialFix, module: Any, calls: Sequence[Call],
         predicted: tuple[float, float | None, float | None] | None) -> None:
    """``fix`` chosen, with its line as written and as it would be (once per fix)."""
    if any(c.fix.name == fix.name for c in chosen):
        return
    code = next((c.code for c in calls if c.where == f"{fix.file}:{fix.line}"
                 and c.method == fix.method and c.code), None)
    chosen.append(Chosen(fix, code, module.rewrite(code, fix) if code else None, predicted))
