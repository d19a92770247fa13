"""What to change, where, and the step it should give, in the verdict's words ("fix at
train.py:33: pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map; predicted 4.85 ->
2.43 ms a step (2.30-2.60)"), from a bottleneck finding's first action (gpudiag.verdicts.
headline's fix sub-entry). The step is the loop's where the run timed it (run.throughput's
steady median), the prediction scaled to it as `gpudiag diff` scales the one it holds B
to, so the run and the diff say one prediction; else the profiled window's. A report
written before actions gets the clause of its advice that names a line. Pure: plain data
in, words out.
"""

from __future__ import annotations

import re
from typing import Any

from gpudiag.layout.units import ms_number

_FILE_LINE = re.compile(r"[\w./-]+\.py:\d+")


def _ms(seconds: Any) -> str | None:
    """Milliseconds by gpudiag.layout.units' one rule, without the unit (None: no number)."""
    return ms_number(seconds) if isinstance(seconds, int | float) else None


def _predicted(now_s: Any, predicted: Any) -> str:
    """"; predicted 32.6 -> 17.4 ms a step (16.9-18.0)", or why there is no prediction; a
    fix that changes the work of a step (a larger batch: whatif's
    ``step_s_per_original_batch``) is said by its throughput, its step being another's."""
    if not isinstance(predicted, dict):
        return ""
    speedup = predicted.get("speedup")
    if "step_s_per_original_batch" in predicted and isinstance(speedup, int | float):
        return f"; predicted x{speedup:.2f} examples/s ({predicted.get('fix') or 'the fix'})"
    now, after = _ms(now_s), _ms(predicted.get("step_s"))
    if after is None:
        basis = predicted.get("basis") or predicted.get("reason")
        return f"; no prediction: {basis}" if basis else ""
    text = f"; predicted {now} -> {after} ms a step" if now else f"; predicted {after} ms a step"
    low, high = _ms(predicted.get("low_s")), _ms(predicted.get("high_s"))
    return f"{text} ({low}-{high})" if low is not None and high is not None else text


def _on_loop(f: dict[str, Any], loop: dict[str, Any] | None, predicted: Any
             ) -> tuple[Any, Any]:
    """The step now and the prediction, on the loop's step where the run timed it (its
    steady median): the prediction scaled from the step it was made from (its model's
    period, else the profiled window's) as `gpudiag diff` scales the one it holds B to;
    else the window's step and the prediction as made."""
    ev = f.get("evidence", {})
    median = loop.get("step_s_median") if loop else None
    base = ((ev.get("predicted") or {}).get("inputs") or {}).get("period_s") or ev.get("step_s")
    if not isinstance(predicted, dict) or not isinstance(median, int | float) or \
            not isinstance(base, int | float) or base <= 0 or \
            "step_s_per_original_batch" in predicted:
        return ev.get("step_s"), predicted
    scale = median / base
    return median, {**predicted, **{k: predicted[k] * scale for k in ("step_s", "low_s", "high_s")
                                    if isinstance(predicted.get(k), int | float)}}


def action_said(f: dict[str, Any], action: dict[str, Any],
                loop: dict[str, Any] | None = None) -> str:
    """One action of finding ``f`` as every face says it: what to change, and the step it
    should give on the loop's step (``loop``: run.throughput's, _on_loop), or why there is
    no prediction ("pass num_parallel_calls=...; predicted 32.6 -> 17.4 ms a step
    (16.9-18.0)"). Where it goes is said beside it by each face."""
    return str(action.get("what") or "") + _predicted(*_on_loop(f, loop,
                                                                action.get("predicted")))


def fix_entry(f: dict[str, Any], loop: dict[str, Any] | None = None) -> str | None:
    """What to change and where, from the finding's first action, with the step it should
    give ("fix at train.py:33: pass num_parallel_calls=...; predicted 32.6 -> 17.4 ms a
    step": on the loop's step where ``loop``, run.throughput's, timed it: _on_loop); a
    report written before actions: the clause of its advice that names a line, and the
    prediction its evidence holds."""
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
    text = f"{head}: {action_said(f, action, loop)}"
    if len(actions) > 1:
        text += f"; {len(actions) - 1} more in report.md"
    return text
