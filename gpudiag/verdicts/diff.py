"""`gpudiag diff A B`: did the change work, and what is the bottleneck now. Pure.

Two ``Side``s in (each run's step series, bottleneck breakdowns, findings, devices,
scaling efficiencies, plain data read by gpudiag.rundir), a DiffRecord (gpudiag.layout.
diff) and findings out:

- ``diff.step-time.<loop>``: each side's median step with its CI_LEVEL interval (the first
  WARMUP steps left out where the series is long enough; per training step: a Keras fit
  with steps_per_execution=N has each call's time over N, and its profiled step, one call,
  is divided by N too), B / A with its interval
  (gpudiag.verdicts.stats.ratio_ci): "no change" when the interval holds 1.00; examples/s.
- ``diff.bottleneck.<finding>``: each device's step parts before and after, the part that
  changed most, the bottleneck fixed / moved / still there; A's prediction for its fix
  beside B's measured step ("predicted X ms (...), measured Y ms (+Z %)").
- ``diff.learning``: the loss at the steps both sides recorded.
- ``diff.devices``, ``diff.findings`` (appeared / went away), ``diff.scaling``
  (efficiency per device count), ``diff.not-compared`` (what could not be, and why).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudiag.layout.diff import (
    CI_LEVEL,
    BottleneckDiff,
    DiffRecord,
    LoopDiff,
    Median,
    PartDiff,
    ScalingDiff,
)
from gpudiag.layout.evidence import STEP_PARTS
from gpudiag.layout.units import counted, duration, ms_number, share
from gpudiag.report import Finding
from gpudiag.rundir.records import Loop, StepBreakdown
from gpudiag.verdicts import whatif
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.throughput import steady
from gpudiag.verdicts.stats import median_ci, ratio_ci, spread

WARMUP = 10  # a run that records no warm-up (scaling): steps left out at a series' start
LOSS_SAME = 0.05  # the loss at matched steps differs by at most 5 %: the same learning


@dataclass(frozen=True)
class Side:
    path: str
    command: str
    loops: dict[str, Loop]
    breakdowns: tuple[StepBreakdown, ...]
    findings: dict[str, str]  # id -> status
    devices: list[str] = field(default_factory=list)
    efficiency: dict[tuple[str, int], float] = field(default_factory=dict)
    # per loop, the steady-state rule's inputs the run recorded (run.throughput: its
    # warm-up steps and the profiled steps it left out)
    steady: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    status: str = "complete"  # gpudiag.rundir's: complete, running, interrupted, failed
    real_path: str = ""  # the directory resolved (A and B one directory: the same)
    # whether the program set TensorFlow's global seed (run.devices' seed_calls); None:
    # not recorded (a run before gpudiag watched it, or not a `run`)
    seeded: bool | None = None
    seeds: tuple[str, ...] = ()  # the calls that set it, with their seed: tf.random.set_seed(3)


def caveats(a: Side, b: Side) -> list[str]:
    """What the diff's verdict must carry: a side still running (or not complete), step
    times dropped as impossible (how many), A and B one directory."""
    out = []
    if a.real_path and a.real_path == b.real_path:
        out.append(f"A and B are one directory ({a.path}): a run compared with itself")
    for name, side in (("A", a), ("B", b)):
        if side.status == "running":
            out.append(f"{name} is still running: compared as it was when read, not as "
                       "it will end")
        elif side.status != "complete":
            out.append(f"{name} is {side.status}: compared on what it recorded")
        for loop in side.loops.values():
            if (n := loop.impossible()):
                out.append(f"{name} {loop.name}: {n} of {len(loop.steps)} step times dropped "
                           "as impossible (negative, zero, not finite or above a million s)")
    return out


def steady_times(loop: Loop, rule: tuple[int, tuple[int, ...]] | None = None
                 ) -> list[float]:
    """A loop's steady-state step times: by run.throughput's rule (throughput.steady) with
    the warm-up and the profiled steps the run left out (``rule``), so that both give the
    same median; a run that records none (scaling): the first WARMUP left out where
    3 x WARMUP remain."""
    if rule is not None:
        warmup, skip = rule
        return [p.step_s for p in loop.steps if p.step_s is not None and p.step_s > 0
                and steady(p.step, p.step + 1, warmup, skip)]
    times = loop.step_times()
    return times[WARMUP:] if len(times) >= 3 * WARMUP else times


def _median(times: Sequence[float]) -> Median:
    ci = median_ci(times)
    return Median(statistics.median(times), ci[0] if ci else None, ci[1] if ci else None,
                  len(times))


def _ms(s: float | None) -> str:
    return "?" if s is None else duration(s)


CI = f"{share(CI_LEVEL)} CI"  # "95 % CI": how every interval is named


def _mtext(m: Median) -> str:
    ci = f"{CI} {ms_number(m.low_s)}-{ms_number(m.high_s)}" if m.low_s is not None \
        and m.high_s is not None else "no interval"
    return f"{duration(m.median_s)} ({ci}, {counted(m.steps, 'step')})"


def _loss(a: Loop, b: Loop) -> tuple[int, float | None, float | None, float | None]:
    la, lb = a.losses(), b.losses()
    common = sorted(set(la) & set(lb))
    if not common:
        return 0, None, None, None
    rel = [abs(lb[s] - la[s]) / abs(la[s]) for s in common if la[s] != 0]
    return len(common), la[common[-1]], lb[common[-1]], max(rel) if rel else None


def loop_diff(a: Loop, b: Loop, rule_a: tuple[int, tuple[int, ...]] | None = None,
              rule_b: tuple[int, tuple[int, ...]] | None = None) -> LoopDiff | None:
    ta, tb = steady_times(a, rule_a), steady_times(b, rule_b)
    if not ta or not tb:
        return None
    ma, mb = _median(ta), _median(tb)
    ci = ratio_ci(ta, tb)
    ratio = mb.median_s / ma.median_s
    verdict = "unknown" if ci is None else "no change" if ci[0] <= 1.0 <= ci[1] else \
        "faster" if ratio < 1 else "slower"
    eps = [x.batch_size / m.median_s if x.batch_size else None for x, m in ((a, ma), (b, mb))]
    matched, last_a, last_b, rel = _loss(a, b)
    return LoopDiff(a.name, b.name, ma, mb, ratio, ci[0] if ci else None,
                    ci[1] if ci else None, verdict, eps[0], eps[1], matched, last_a, last_b,
                    rel, CI_LEVEL)


def pair_loops(a: Side, b: Side) -> tuple[list[tuple[Loop, Loop]], list[str]]:
    """Loops of the same name; one loop each with different names is compared too."""
    common = [n for n in a.loops if n in b.loops]
    pairs = [(a.loops[n], b.loops[n]) for n in common]
    left = [n for n in a.loops if n not in common]
    right = [n for n in b.loops if n not in common]
    if not pairs and len(left) == 1 and len(right) == 1:
        return [(a.loops[left[0]], b.loops[right[0]])], []
    said = [f"loop {n} only in A" for n in left] + [f"loop {n} only in B" for n in right]
    return pairs, said


# One run of each side: the intervals are of each run's own steps, which do not hold what
# changes from one run of a program to the next (the machine's load, the data order, the
# placement of threads): said with every step-time comparison.
WITHIN_RUN = ("; the intervals are within-run (one run of each side: the spread of each "
              "run's own steps), not run-to-run: a second run of the same program can land "
              "outside them")


def step_finding(d: LoopDiff) -> Finding:
    name = d.name_a if d.name_a == d.name_b else f"{d.name_a} (A) / {d.name_b} (B)"
    ci = f" ({CI} {d.ratio_low:.2f}-{d.ratio_high:.2f})" if d.ratio_low is not None \
        and d.ratio_high is not None else " (no interval: too few steps)"
    what = {"faster": f"{1 / d.ratio:.2f}x faster", "slower": f"{d.ratio:.2f}x slower",
            "no change": "no change: the interval holds 1.00",
            "unknown": "cannot tell: too few steps for an interval"}[d.verdict]
    text = f"{name}: A {_mtext(d.a)} -> B {_mtext(d.b)}; B/A {d.ratio:.2f}{ci}: {what}"
    if d.examples_per_s_a and d.examples_per_s_b:
        text += f"; {d.examples_per_s_a:,.0f} -> {d.examples_per_s_b:,.0f} examples/s"
    text += WITHIN_RUN
    return Finding(f"diff.step-time.{_slug(d.name_b)}",
                   "warn" if d.verdict == "slower" else "ok", text, _plain(d),
                   title=step_title(d, name))


def step_title(d: LoopDiff, name: str = "") -> str:
    """The diff's answer: ``B is 2.66x faster (95 % CI 2.59-2.73): 27.0 -> 10.2 ms a
    step``, the loop's name before it where that fits."""
    steps = f"{ms_number(d.a.median_s)} -> {ms_number(d.b.median_s)} ms a step"
    lo, hi = d.ratio_low, d.ratio_high
    if d.verdict == "faster" and lo and hi:
        head = f"B is {1 / d.ratio:.2f}x faster ({CI} {1 / hi:.2f}-{1 / lo:.2f})"
    elif d.verdict == "slower" and lo and hi:
        head = f"B is {d.ratio:.2f}x slower ({CI} {lo:.2f}-{hi:.2f})"
    elif d.verdict == "no change" and lo is not None and hi is not None:
        head = f"no change: B/A {d.ratio:.2f} ({CI} {lo:.2f}-{hi:.2f})"
    else:
        head = f"cannot tell: too few steps (B/A {d.ratio:.2f})"
    return title(f"{name}: {head}: {steps}" if name else f"{head}: {steps}",
                 f"{head}: {steps}", head)


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower()).strip("-")


def _plain(x: Any) -> dict[str, Any]:
    from dataclasses import asdict

    out: dict[str, Any] = asdict(x)
    return out


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
    return Finding(f"diff.bottleneck.{_slug(d.finding_b)}",
                   "warn" if d.outcome in ("still there", "appeared") else
                   "skip" if d.outcome == "unsteady" else "ok", text,
                   _plain(d), title=_bottleneck_title(d))


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
    where its window missed the input wait: step_causes.window_missed), else A's profiled
    step. The prediction is scaled from it to A's steady median."""
    period = (pred.get("inputs") or {}).get("period_s")
    return float(period) if period else float(a.step_s or 0.0)


def hold_to_prediction(d: BottleneckDiff, a: StepBreakdown, b: StepBreakdown,
                       median_a: float | None) -> BottleneckDiff:
    """B's measured step against A's prediction with its interval (whatif.with_interval),
    scaled to A's median step as the point is: for an input-bound A, the prediction for
    the change B's recorded pipeline made (whatif.changes_made, A's ``by_change``), not for
    every fix A lacked; whether B fell inside; and the machine's load when either was
    judged, where it exceeded the cores (the comparison is then weak)."""
    pred = d.predicted
    if not pred or d.measured_step_s is None or not median_a or not _base(pred, a):
        return d
    chosen, held = pred, None
    made = whatif.changes_made(a.dataset_calls, b.dataset_calls) \
        if a.dataset_calls and b.dataset_calls else frozenset()
    by_change = pred.get("by_change") or {}
    if made and whatif.change_key(made) in by_change:
        chosen = by_change[whatif.change_key(made)]
        held = f"{MADE}{chosen.get('fix') or whatif.change_key(made)}"
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


def pair_breakdowns(a: Side, b: Side) -> list[tuple[StepBreakdown, StepBreakdown]]:
    by_id = {x.finding_id: x for x in b.breakdowns if x.step_s}
    pairs = [(x, by_id[x.finding_id]) for x in a.breakdowns if x.finding_id in by_id and x.step_s]
    if not pairs:
        left = [x for x in a.breakdowns if x.step_s]
        if len(left) == 1 and len(by_id) == 1:
            pairs = [(left[0], next(iter(by_id.values())))]
    return pairs


def _matched(diffs: Sequence[LoopDiff]) -> list[LoopDiff]:
    return [d for d in diffs if d.loss_steps_matched and d.loss_max_rel_diff is not None]


def _loss_rows(matched: Sequence[LoopDiff]) -> str:
    """Each loop's last loss on both sides and how far apart at matched steps."""
    return "; ".join(f"{d.name_b}: last loss {d.loss_a_last:.4f} -> {d.loss_b_last:.4f}; "
                     f"over {counted(d.loss_steps_matched, 'matched step')} at most "
                     f"{d.loss_max_rel_diff:.1%} apart" for d in matched)


def learning_finding(diffs: Sequence[LoopDiff]) -> Finding:
    matched = _matched(diffs)
    if not matched:
        return Finding("diff.learning", "skip", "no loss at matching steps on both sides",
                       {}, title="no loss at matching steps on both sides")
    same = all((d.loss_max_rel_diff or 0) <= LOSS_SAME for d in matched)
    head = "the model learns the same" if same else "the loss differs: the change altered " \
        "what the model learns (or its data order)"
    worst = max(d.loss_max_rel_diff or 0.0 for d in matched)
    return Finding("diff.learning", "ok" if same else "warn", f"{head}: {_loss_rows(matched)}",
                   {"loops": [{"loop": d.name_b, "matched_steps": d.loss_steps_matched,
                               "max_rel_diff": d.loss_max_rel_diff} for d in matched],
                    "same_within": LOSS_SAME},
                   title=(f"the model learns the same: losses at most {worst:.1%} apart"
                          if same else f"the loss differs: up to {worst:.1%} apart at "
                          "matched steps"))


def _seeds_said(a: bool | None, b: bool | None) -> str:
    """Which side set no seed, in words ("" when both did)."""
    if a and b:
        return ""
    said = {False: "sets no seed", None: "does not record whether the program sets a seed"}
    if a == b:
        return "neither run sets a seed" if a is False else \
            "neither run records whether the program sets a seed"
    return "; ".join(f"run {n} {said[v]}" for n, v in (("A", a), ("B", b)) if not v)


def _end_level(loop: Loop) -> tuple[float, tuple[float, float], str] | None:
    """Where a loop's loss ends: the median of its last quarter with that median's interval
    (stats.spread), None with fewer than 3 losses."""
    losses = [v for _, v in sorted(loop.losses().items())]
    if len(losses) < 3:
        return None
    return spread(losses[-max(3, len(losses) // 4):])


def learning_against_noise(pairs: Sequence[tuple[Loop, Loop]], diffs: Sequence[LoopDiff],
                           a: Side, b: Side) -> Finding:
    """diff.learning, held against what run-to-run variation explains. Two runs that set
    the same seed start from the same weights: a loss apart at matched steps beyond
    LOSS_SAME is the change's doing (learning_finding). Without a seed on both sides the
    initial weights and the data order differ from run to run, by as much as the 15 % a
    program once differed from its own fix at matched steps, and one run of each side does
    not measure that spread: a difference is said as such, ok when both losses end at the
    same level within their runs' own spread (their end levels' intervals overlap), else
    "cannot tell" (skip), never a warn."""
    f = learning_finding(diffs)
    noise = _seeds_said(a.seeded, b.seeded)
    if not noise and a.seeds and b.seeds and a.seeds != b.seeds:
        noise = (f"the two runs set other seeds (A {', '.join(a.seeds)}; B "
                 f"{', '.join(b.seeds)})")
    evidence = {**f.evidence, "seeded_a": a.seeded, "seeded_b": b.seeded,
                "seeds_a": list(a.seeds), "seeds_b": list(b.seeds)}
    if f.status == "skip" or not noise:
        return replace(f, evidence=evidence)
    ends = []
    for x, y in pairs:
        la, lb = _end_level(x), _end_level(y)
        if la is not None and lb is not None:
            ends.append((y.name, la, lb))
    evidence["end_levels"] = [{"loop": n, "a": [ea[0], *ea[1]], "b": [eb[0], *eb[1]],
                               "interval_from": ea[2]} for n, ea, eb in ends]
    levels = "; ".join(f"{n}: A ends at {ea[0]:.4f} ({ea[1][0]:.4f}-{ea[1][1]:.4f}), B at "
                       f"{eb[0]:.4f} ({eb[1][0]:.4f}-{eb[1][1]:.4f})" for n, ea, eb in ends)
    why = (f"{noise}: two runs differ by their initial weights and data order, and one run "
           "of each side does not measure by how much")
    if f.status == "ok":
        return replace(f, message=f"{f.message} ({why})", evidence=evidence)
    apart = _loss_rows(_matched(diffs))  # the numbers, not the words of f's verdict
    if ends and all(ea[1][0] <= eb[1][1] and eb[1][0] <= ea[1][1] for _, ea, eb in ends):
        return Finding("diff.learning", "ok", (
            f"the loss ends at the same level within each run's own spread ({levels}); at "
            f"matched steps it differs ({apart}), which {why} can explain"), evidence,
            title="the loss ends at the same level: within run-to-run noise")
    return Finding("diff.learning", "skip", title="cannot tell: no common seed, the loss gap "
                   "may be run-to-run noise", message=(
        f"cannot tell whether the change altered what the model learns: {apart}"
        + (f"; {levels}" if levels else "") + f"; {why}"), evidence=evidence,
        advice="Set the seed in both (keras.utils.set_random_seed(1) or "
               "tf.random.set_seed(1) before building the model) and run both again, or run "
               "each side several times to see the run-to-run spread.")


def findings_changes(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[list[str], list[str]]:
    bad = ("warn", "fail")
    appeared = [f"{i}: {s}" for i, s in b.items() if s in bad and a.get(i) not in bad]
    gone = [f"{i}: {s}" for i, s in a.items() if s in bad and b.get(i) not in bad]
    return appeared, gone


def scaling_diffs(a: Side, b: Side) -> list[ScalingDiff]:
    keys = sorted(set(a.efficiency) | set(b.efficiency))
    return [ScalingDiff(s, n, a.efficiency.get((s, n)), b.efficiency.get((s, n)))
            for s, n in keys]


def _medians(side: Side) -> dict[str, float]:
    """Each loop's steady median, by the rule its run recorded: the same median its loop's
    comparison gives (loop_diff), so that B is held to its prediction by its one step."""
    return {n: statistics.median(t) for n, loop in side.loops.items()
            if (t := steady_times(loop, side.steady.get(n)))}


def _other_findings(rec: DiffRecord, a: Side, b: Side) -> list[Finding]:
    out = []
    da, db = sorted(a.devices), sorted(b.devices)
    out.append(Finding("diff.devices", "ok" if da == db else "warn",
                       f"devices used: {', '.join(da) or 'none seen'}" if da == db else
                       f"devices used: A {', '.join(da) or 'none seen'}; B "
                       f"{', '.join(db) or 'none seen'}", {"a": da, "b": db},
                       title=title(f"the same devices used: {', '.join(da) or 'none seen'}",
                                   f"the same {len(da)} device(s) used") if da == db else
                       title(f"devices differ: A {', '.join(da) or 'none'}; B "
                             f"{', '.join(db) or 'none'}", f"devices differ: A {len(da)}, "
                             f"B {len(db)}")))
    text = "; ".join(([f"appeared in B: {', '.join(rec.findings_appeared)}"]
                      if rec.findings_appeared else []) +
                     ([f"went away: {', '.join(rec.findings_gone)}"]
                      if rec.findings_gone else [])) or "the same findings warn or fail"
    out.append(Finding("diff.findings", "warn" if rec.findings_appeared else "ok", text,
                       {"appeared": rec.findings_appeared, "gone": rec.findings_gone},
                       title=(f"{len(rec.findings_appeared)} warning(s) appeared in B, "
                              f"{len(rec.findings_gone)} went away"
                              if rec.findings_appeared or rec.findings_gone else
                              "the same findings warn or fail")))
    if rec.scaling:
        rows = [f"{s.strategy} {s.n_devices} devices "
                f"{'?' if s.efficiency_a is None else f'{s.efficiency_a:.2f}'} -> "
                f"{'?' if s.efficiency_b is None else f'{s.efficiency_b:.2f}'}"
                for s in rec.scaling]
        out.append(Finding("diff.scaling", "ok", "scaling efficiency: " + "; ".join(rows),
                           {"configs": [_plain(s) for s in rec.scaling]},
                           title=title("scaling efficiency: " + "; ".join(rows),
                                       f"scaling efficiency of {len(rows)} configuration(s)")))
    if rec.not_compared:
        out.append(Finding("diff.not-compared", "skip", "not compared: " +
                           "; ".join(rec.not_compared), {"reasons": rec.not_compared},
                           title=title("not compared: " + "; ".join(rec.not_compared),
                                       f"{len(rec.not_compared)} thing(s) not compared")))
    return out


def judge(a: Side, b: Side) -> tuple[DiffRecord, list[Finding]]:
    """The diff of run A against run B: the record for report.json and the findings."""
    pairs, said = pair_loops(a, b)
    loops = [d for x, y in pairs
             if (d := loop_diff(x, y, a.steady.get(x.name), b.steady.get(y.name))) is not None]
    said += [f"loop {x.name}: no step times on one side" for x, y in pairs
             if loop_diff(x, y, a.steady.get(x.name), b.steady.get(y.name)) is None]
    ma, mb = _medians(a), _medians(b)
    necks = []
    for x, y in pair_breakdowns(a, b):
        loop_a = next((n for n in ma if y.finding_id.endswith(n) or len(ma) == 1), None)
        loop_b = next((n for n in mb if y.finding_id.endswith(n) or len(mb) == 1), None)
        x, y = (per_step(x, side.loops[n].steps_per_call if n in side.loops else 1)
                for x, side, n in ((x, a, loop_a or ""), (y, b, loop_b or "")))
        necks.append(hold_to_prediction(
            bottleneck_diff(x, y, ma.get(loop_a or ""), mb.get(loop_b or "")), x, y,
            ma.get(loop_a or "")))
    if not necks and (a.breakdowns or b.breakdowns):
        said.append("bottleneck: no profiled step breakdown on both sides")
    if a.command != b.command:
        said.append(f"A is a `{a.command}` run, B a `{b.command}` run: compared where both "
                    "have the same kind of data")
    appeared, gone = findings_changes(a.findings, b.findings)
    rec = DiffRecord(a.path, b.path, a.command, b.command, loops, necks, scaling_diffs(a, b),
                     sorted(a.devices), sorted(b.devices), appeared, gone, said)
    found = [step_finding(d) for d in loops] + [bottleneck_finding(d) for d in necks] + \
        [learning_against_noise(pairs, loops, a, b)] + _other_findings(rec, a, b)
    if said_too := caveats(a, b):
        found.insert(0, Finding("diff.caveats", "warn", "; ".join(said_too),
                                {"caveats": said_too},
                                title=title(f"diff with caveats: {said_too[0]}",
                                            "diff with caveats: " + re.sub(
                                                r" \([^)]*\)", "", said_too[0]),
                                            f"diff with {len(said_too)} caveat(s): see the "
                                            "message")))
    return rec, found
