"""`gpudiag diff`'s bottlenecks (the judging is gpudiag.verdicts.diff's): each device's
step parts before and after, the part that changed most, the bottleneck fixed / moved /
still there; A's prediction for its fix (for the change B's pipeline made, where A's
finding sized each) held to B's measured step, scaled to A's steady median; the
diff.bottleneck.<finding> finding.
"""

from __future__ import annotations

from dataclasses import asdict, replace
from typing import Any

from gpudiag.layout.diff import BottleneckDiff, PartDiff
from gpudiag.layout.evidence import STEP_PARTS
from gpudiag.layout.units import duration
from gpudiag.report import Finding
from gpudiag.rundir.records import StepBreakdown
from gpudiag.verdicts.common import slug, title
from gpudiag.verdicts.whatif_input import change_key, changes_made


def _ms(s: float | None) -> str:
    return "?" if s is None else duration(s)


def _parts(a: StepBreakdown, b: StepBreakdown) -> list[PartDiff]:
    devices = [d for d in a.devices if d in b.devices]
    if not devices and len(a.devices) == 1 and len(b.devices) == 1:
        (da,), (db,) = a.devices.values(), b.devices.values()
        return [PartDiff(f"{da.device} / {db.device}", p, da.part(p), db.part(p))
                for p in STEP_PARTS]
    return [PartDiff(d, p, a.devices[d].part(p), b.devices[d].part(p))
            for d in devices for p in STEP_PARTS]


def bottleneck_diff(a: StepBreakdown, b: StepBreakdown, median_a: float | None,
                    median_b: float | None) -> BottleneckDiff:
    before, after = a.bottleneck, b.bottleneck
    outcome = "none" if before is None and after is None else "appeared" if before is None \
        else "fixed" if after is None else "still there" if after == before else "moved"
    parts = _parts(a, b)
    most = max(parts, key=lambda p: abs(p.b_s - p.a_s), default=None)
    pred = a.predicted if isinstance(a.predicted, dict) else None
    scaled = measured = error = None
    if pred and pred.get("step_s") and median_a and _base(pred, a):
        scaled = median_a * float(pred["step_s"]) / _base(pred, a)
        measured = median_b
        error = measured / scaled - 1 if measured else None
    # B's window in a phase its steady steps left behind (A's prediction is scaled to A's
    # median whatever its window held; B's bottleneck is what the diff says of the fix)
    unsteady = [f"B's profiled steps waited {_ms(wait)} a step for input, longer than its "
                f"steady steps take whole ({_ms(median_b)}, median)"
                for wait in [_input_wait(b)] if median_b and wait > median_b]
    if unsteady:
        outcome = "unsteady"
    return BottleneckDiff(a.finding_id, b.finding_id, before, after, outcome, a.step_s,
                          b.step_s, parts, f"{most.device} {most.part}" if most else None,
                          pred, scaled, measured, error,
                          unsteady="; ".join(unsteady) if unsteady else None)


def _input_wait(x: StepBreakdown) -> float:
    """The profiled step's input wait (the most of any device's)."""
    return max((d.part("input") for d in x.devices.values()), default=0.0)


def bottleneck_finding(d: BottleneckDiff) -> Finding:
    said = {"fixed": f"{d.before}: fixed (B has no bottleneck)",
            "moved": f"the bottleneck moved: {d.before} -> {d.after}",
            "still there": f"still {d.before}", "none": "no bottleneck on either side",
            "appeared": f"a bottleneck appeared in B: {d.after}",
            "unsteady": f"the bottlenecks are not compared: {d.unsteady}, so B's profiled "
                        f"window is not its steady state (A: {d.before or 'none'}, "
                        f"B: {d.after or 'none'} there); profile later steps of B "
                        "(`gpudiag run --profile-warmup N`, N past the steps the program "
                        "needs to settle: a first epoch that fills a cache)"}[d.outcome]
    by_part = "; ".join(f"{p.part} {_ms(p.a_s)} -> {_ms(p.b_s)}" for p in d.parts
                        if abs(p.b_s - p.a_s) > 0 or p.a_s > 0)
    text = f"{d.finding_a}: step {_ms(d.step_a_s)} -> {_ms(d.step_b_s)}; {said}"
    if d.changed_most:
        text += f"; the change came from {d.changed_most}"
    text += f" ({by_part})" if by_part else ""
    if d.predicted_step_s is not None and d.measured_step_s is not None:
        text += prediction_said(d)
    elif d.predicted and d.predicted.get("why"):
        text += f"; no prediction: {d.predicted['why']}"
    return Finding(f"diff.bottleneck.{slug(d.finding_b)}",
                   "warn" if d.outcome in ("still there", "appeared") else
                   "skip" if d.outcome == "unsteady" else "ok", text,
                   asdict(d), title=_bottleneck_title(d))


def _bottleneck_title(d: BottleneckDiff) -> str:
    said = {"fixed": f"{d.before} fixed", "moved": f"bottleneck moved: {d.before} -> {d.after}",
            "still there": f"still {d.before}", "none": "no bottleneck on either side",
            "appeared": f"{d.after} appeared in B",
            "unsteady": "B's profiled window is not its steady state: not compared"
            }[d.outcome]
    # the profiled windows' steps, named so: the prediction is of B's median step, and
    # whether it held is said apart (never a predicted median beside a window's step)
    step = f"profiled step {duration(d.step_a_s)} -> {duration(d.step_b_s)}"
    if d.inside is not None:
        step += "; prediction held" if d.inside else "; prediction missed"
    return title(f"{said}: {step}", said, d.outcome)


MADE = "for the change B made: "  # held_to's words when B is held to its own change


def _base(pred: dict[str, Any], a: StepBreakdown) -> float:
    """The step A's prediction was made from: its model's period (a Keras fit's run step
    where its window missed the input wait: input_causes.window_missed), else A's profiled
    step. The prediction is scaled from it to A's steady median."""
    period = (pred.get("inputs") or {}).get("period_s")
    return float(period) if period else float(a.step_s or 0.0)


def hold_to_prediction(d: BottleneckDiff, a: StepBreakdown, b: StepBreakdown,
                       median_a: float | None) -> BottleneckDiff:
    """B's measured step against A's prediction with its interval (prediction.with_interval),
    scaled to A's median step as the point is: for an input-bound A, the prediction for
    the change B's recorded pipeline made (changes_made, A's ``by_change``), not for
    every fix A lacked; whether B fell inside; and the machine's load when either was
    judged, where it exceeded the cores (the comparison is then weak)."""
    pred = d.predicted
    if not pred or d.measured_step_s is None or not median_a or not _base(pred, a):
        return d
    chosen, held = pred, None
    made = changes_made(a.dataset_calls, b.dataset_calls) \
        if a.dataset_calls and b.dataset_calls else frozenset()
    by_change = pred.get("by_change") or {}
    if made and change_key(made) in by_change:
        chosen = by_change[change_key(made)]
        held = f"{MADE}{chosen.get('fix') or change_key(made)}"
    elif a.dataset_calls and b.dataset_calls and by_change and not made:
        held = "every fix A's finding advised (B's pipeline made none of them)"
    if chosen.get("step_s") is None:
        return d
    scale = median_a / _base(pred, a)
    point = float(chosen["step_s"]) * scale
    low = chosen.get("step_s_low")
    high = chosen.get("step_s_high")
    low_s = None if low is None else float(low) * scale
    high_s = None if high is None else float(high) * scale
    inside = None if low_s is None or high_s is None else \
        low_s <= d.measured_step_s <= high_s
    return replace(d, predicted_step_s=point, error=d.measured_step_s / point - 1,
                   predicted_low_s=low_s, predicted_high_s=high_s, inside=inside,
                   held_to=held, load_note=_load_note(pred, b.predicted))


def _load_note(a: dict[str, Any], b: dict[str, Any] | None) -> str | None:
    """The machine's load beyond its cores when A's prediction (or B's) was made."""
    said = []
    for name, p in (("A", a), ("B", b or {})):
        m = p.get("machine") or p.get("inputs") or {}  # inputs: an input-bound model's
        load, cores = m.get("load_average_1min"), m.get("cores")
        if load is not None and cores and load > cores:
            said.append(f"{name} judged at load {load:.1f} on {cores} cores")
    return "; ".join(said) or None


def prediction_said(d: BottleneckDiff) -> str:
    """``; predicted 1.90 ms (1.62-2.31 ms: parallel map ..., for the change B made
    (parallel + prefetch)), measured 2.05 ms (+8 %): inside the interval``."""
    model = (d.predicted or {}).get("fix", "")
    span = f"{_ms(d.predicted_low_s)}-{_ms(d.predicted_high_s)}: " \
        if d.predicted_low_s is not None and d.predicted_high_s is not None else ""
    held = d.held_to if d.held_to and d.held_to.startswith(MADE) else \
        f"{model}, held to {d.held_to}" if d.held_to else model
    text = (f"; predicted {_ms(d.predicted_step_s)} ({span}{held}), measured "
            f"{_ms(d.measured_step_s)} ({(d.error or 0):+.0%})")
    if d.inside is not None:
        text += ": inside the predicted interval" if d.inside else \
            ": outside the predicted interval"
    if d.load_note:
        text += (f" (weak: {d.load_note}; other work held the cores the prediction "
                 "counts on)")
    return text


def per_step(x: StepBreakdown, n: int) -> StepBreakdown:
    """A breakdown whose profiled "step" is one call of ``n`` training steps (Keras fit's
    steps_per_execution: the host's step marker is per call), per training step: every
    part over ``n``; its prediction (made for a call) left as it is."""
    if n <= 1:
        return x
    ev = x.evidence
    return replace(x, evidence=replace(
        ev, step_s=None if ev.step_s is None else ev.step_s / n,
        devices={d: p.scaled(1 / n) for d, p in ev.devices.items()}))
