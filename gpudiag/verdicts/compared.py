"""B against A in words, for every face that says what `gpudiag diff` found: the ratio
the right way round ("2.66x faster (95 % CI 2.59-2.73)", never a ratio below 1 called
faster), one compared loop ("B is 2.66x faster (95 % CI 2.59-2.73): 27.0 -> 10.2 ms a
step"), the diff's result line (the verdict's first entry, gpudiag.verdicts.headline) and
whether A's prediction for the fix held (B's median step inside its interval). Pure: plain
data (report.json's content, the diff record's) in, words out.
"""

from __future__ import annotations

from typing import Any

from gpudiag.layout.families import family_of
from gpudiag.layout.units import ms_number


def _ms(seconds: Any) -> str | None:
    """Milliseconds by gpudiag.layout.units' one rule, without the unit (None: no number)."""
    return ms_number(seconds) if isinstance(seconds, int | float) else None


def _diff_steps(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The report's diff.step-time findings (their family's evidence: DiffStep)."""
    out = []
    for f in report.get("findings", []):
        family = family_of(f["id"]) if isinstance(f, dict) and "id" in f else None
        if family is not None and family.evidence == "DiffStep":
            out.append(f)
    return out


def change(ratio: float, low: float | None, high: float | None, verdict: str | None) -> str:
    """B against A from B/A = ``ratio`` and its interval, said the right way round: "2.66x
    faster (95 % CI 2.59-2.73)" (B/A below 1: A/B, and the interval turned over), "1.50x
    slower (95 % CI 1.40-1.60)", "no change: B/A 0.99 (95 % CI 0.97-1.02 holds 1.00)",
    "cannot tell: too few steps for an interval (B/A 0.50)"."""
    if low is None or high is None or low <= 0:
        return f"cannot tell: too few steps for an interval (B/A {ratio:.2f})"
    if verdict == "no change" or low <= 1.0 <= high:
        return f"no change: B/A {ratio:.2f} (95 % CI {low:.2f}-{high:.2f} holds 1.00)"
    if ratio < 1:
        return f"{1 / ratio:.2f}x faster (95 % CI {1 / high:.2f}-{1 / low:.2f})"
    return f"{ratio:.2f}x slower (95 % CI {low:.2f}-{high:.2f})"


def loop_result(ratio: float, low: float | None, high: float | None, verdict: str | None,
                a_s: float, b_s: float) -> str:
    """One compared loop in words: "B is 2.66x faster (95 % CI 2.59-2.73): 27.0 -> 10.2
    ms a step" (the durations by gpudiag.layout.units' rule, as the finding's title)."""
    said = change(ratio, low, high, verdict)
    head = f"B is {said}" if said[0].isdigit() else said
    return f"{head}: {ms_number(a_s)} -> {ms_number(b_s)} ms a step"


def prediction_held(d: dict[str, Any]) -> str | None:
    """Whether A's prediction for the fix held, from a compared bottleneck (the diff
    record's, gpudiag.layout.diff.BottleneckDiff as plain data): "the prediction held: B's
    median step 4.11 ms is inside the predicted 3.80-7.20 ms (predicted 5.90)", or "did not
    hold: ... is under the predicted 5.00-7.20 ms (better than predicted 5.90)"; without
    an interval, the two numbers. None: nothing predicted or measured."""
    measured, predicted = _ms(d.get("measured_step_s")), _ms(d.get("predicted_step_s"))
    if measured is None or predicted is None:
        return None
    low, high = _ms(d.get("predicted_low_s")), _ms(d.get("predicted_high_s"))
    if d.get("inside") is None or low is None or high is None:
        return (f"the prediction cannot be held to: B's median step {measured} ms, "
                f"predicted {predicted} ms with no interval")
    span = f"{low}-{high} ms"
    if d["inside"]:
        return (f"the prediction held: B's median step {measured} ms is inside the "
                f"predicted {span} (predicted {predicted})")
    under = d["measured_step_s"] < d["predicted_low_s"]
    return (f"the prediction did not hold: B's median step {measured} ms is "
            f"{'under' if under else 'over'} the predicted {span} "
            f"({'better' if under else 'worse'} than predicted {predicted})")


def diff_line(report: dict[str, Any]) -> str | None:
    """`gpudiag diff`'s result in words, B against A (gpudiag.verdicts.diff's
    diff.step-time findings; ``loop_result``); the loop's name when it compared several."""
    found = _diff_steps(report)
    if not found:
        return None
    said = []
    for f in found:
        ev = f.get("evidence", {})
        ratio, low, high = ev.get("ratio"), ev.get("ratio_low"), ev.get("ratio_high")
        a, b = (ev.get(k) or {} for k in ("a", "b"))
        ma, mb = a.get("median_s"), b.get("median_s")
        if not isinstance(ratio, int | float) or ratio <= 0 or not isinstance(
                ma, int | float) or not isinstance(mb, int | float):
            said.append(" ".join(str(f.get("title") or f.get("message") or "").split()))
            continue
        text = loop_result(ratio, low if isinstance(low, int | float) else None,
                           high if isinstance(high, int | float) else None,
                           ev.get("verdict"), ma, mb)
        name = ev.get("name_b")
        said.append(f"{name}: {text}" if len(found) > 1 and name else text)
    return "; ".join(said)
