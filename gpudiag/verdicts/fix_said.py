"""What to change, where, and the step it should give, in the verdict's words ("fix at
train.py:33: pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map; predicted 4.85 ->
2.43 ms a step (2.30-2.60)"), from a bottleneck finding's first action (gpudiag.verdicts.
headline's fix sub-entry). The prediction is made once: `run` moves it onto the loop's
step where it timed the loop (on_loop: run.throughput's steady median), scaled as `gpudiag
diff` scales the one it holds B to, and every face says the action as it stands
(action_said); else it stays on the profiled window's step. A report written before
actions gets the clause of its advice that names a line. Pure: plain data in, words out.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from gpudiag.layout.units import ms_number
from gpudiag.report import Finding, Prediction

_FILE_LINE = re.compile(r"[\w./-]+\.py:\d+")


def _ms(seconds: Any) -> str | None:
    """Milliseconds by gpudiag.layout.units' one rule, without the unit (None: no number)."""
    return ms_number(seconds) if isinstance(seconds, int | float) else None


def _predicted(now_s: Any, predicted: Any) -> str:
    """The evidence's prediction (a report written before actions) as an action's is said
    (Prediction.said): "; predicted 32.6 -> 17.4 ms a step", or why there is none; a fix
    that changes the work of a step (a larger batch: whatif's
    ``step_s_per_original_batch``) is said by its throughput, its step being another's."""
    if not isinstance(predicted, dict):
        return ""
    speedup = predicted.get("speedup")
    if "step_s_per_original_batch" in predicted and isinstance(speedup, int | float):
        return f"; predicted x{speedup:.2f} examples/s ({predicted.get('fix') or 'the fix'})"
    step = predicted.get("step_s")
    said = Prediction(
        step if isinstance(step, int | float) else None,
        basis=str(predicted.get("basis") or predicted.get("reason") or ""),
        from_s=now_s if isinstance(now_s, int | float) else None).said()
    return f"; {said}" if said else ""


def loop_of(message: str, throughput: dict[str, Any]) -> dict[str, Any] | None:
    """The loop a bottleneck finding (its ``message``) profiled, as run.throughput of the
    same process timed it (``throughput``: that finding's evidence): the one its message
    names, else the only one; None: not timed, or not told which."""
    loops = [lp for lp in throughput.get("loops") or [] if isinstance(lp, dict)]
    loop = next((lp for lp in loops if message.startswith(f"{lp.get('series')}: ")),
                loops[0] if len(loops) == 1 else None)
    return loop if loop is not None and _ms(loop.get("step_s_median")) is not None else None


def on_loop(f: Finding, loop: dict[str, Any] | None) -> Finding:
    """Bottleneck finding ``f`` with each action's prediction moved onto the loop's step
    where the run timed it (``loop``: loop_of; its steady median): scaled by that step over
    the one it was predicted from (its model's period, else the profiled window's), as
    `gpudiag diff` scales the prediction it holds B to. Made once, in the verdict, so every
    face and the diff say one prediction for one fix."""
    median = loop.get("step_s_median") if loop else None
    if not isinstance(median, int | float) or median <= 0:
        return f

    def moved(p: Prediction | None) -> Prediction | None:
        if p is None or p.step_s is None or not p.from_s:
            return p
        scale = median / p.from_s
        return replace(p, step_s=p.step_s * scale, from_s=median,
                       low_s=None if p.low_s is None else p.low_s * scale,
                       high_s=None if p.high_s is None else p.high_s * scale)

    return replace(f, actions=tuple(replace(a, predicted=moved(a.predicted))
                                    for a in f.actions))


def action_said(action: dict[str, Any]) -> str:
    """One action of a finding as every face says it: what to change, and the step it
    should give, from the step it is predicted from ("pass num_parallel_calls=...;
    predicted 32.6 -> 17.4 ms a step (16.9-18.0)"), or why there is no prediction. Where
    it goes is said beside it by each face."""
    predicted = action.get("predicted")
    said = Prediction.from_dict(predicted).said() if isinstance(predicted, dict) else ""
    return str(action.get("what") or "") + (f"; {said}" if said else "")


def fix_entry(f: dict[str, Any]) -> str | None:
    """What to change and where, from the finding's first action, with the step it should
    give ("fix at train.py:33: pass num_parallel_calls=...; predicted 32.6 -> 17.4 ms a
    step": on the loop's step where the run timed it, on_loop); a report written before
    actions: the clause of its advice that names a line, and the prediction its evidence
    holds."""
    ev = f.get("evidence", {})
    actions = [a for a in f.get("actions") or [] if isinstance(a, dict) and a.get("what")]
    if not actions:
        for clause in str(f.get("advice") or "").split("; "):
            where = _FILE_LINE.search(clause)
            if where:  # the line and its source said once, in front
                said = re.sub(rf" at {re.escape(where.group(0))}(?: \(`[^`]*`\))?", "",
                              clause)
                return f"fix at {where.group(0)}: {said}" + _predicted(
                    ev.get("step_s"), ev.get("predicted"))
        advice = " ".join(str(f.get("advice") or "").split())
        if ev.get("causes") and advice:  # no line of the user's: the advice's first sentence
            return "fix: " + re.split(r"(?<=\.)\s", advice, maxsplit=1)[0] + _predicted(
                ev.get("step_s"), ev.get("predicted"))
        return "fix: see report.md" if ev.get("causes") else None
    action = actions[0]
    head = f"fix at {action['where']}" if action.get("where") else "fix"
    text = f"{head}: {action_said(action)}"
    if len(actions) > 1:
        text += f"; {len(actions) - 1} more in report.md"
    return text
