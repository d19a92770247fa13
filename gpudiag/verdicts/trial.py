"""`gpudiag try`'s verdicts: each fix's measured B/A against the program as written, its
interval from the run-to-run variation across rounds, the prediction beside it, and the
answer's first line. Pure: the trials' step times (plain records) in, findings out.

Each round runs the program as written (A) and each fix (B, C ...) once, interleaved. A
round's B/A is B's median steady step over the same round's A's; the fix's B/A is the
geometric mean of its rounds' (one number per round: the variation between runs is what
the interval is made of, said as such), with a Student-t interval at CI_LEVEL on their
logarithms (two rounds give a wide one: honestly). A fix whose trial crashed where the
same round's A did not "broke the program here": never a speed-up.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from gpudiag.fixes import Chosen
from gpudiag.fixes import label as fix_label
from gpudiag.fixes.choice import NotTried
from gpudiag.layout.compared import TriedFix
from gpudiag.layout.units import CI_LEVEL, counted, ms_number
from gpudiag.report import Finding, Status
from gpudiag.verdicts import trial_loss
from gpudiag.verdicts.common import title

#: Student's t at 0.975 (a two-sided 95 % interval) by degrees of freedom, 1-10; beyond: 2.0.
T_975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228)


@dataclass(frozen=True)
class Trial:
    """One measured run of the program: ``fix`` (a fix's FIX.name; "" the program as written),
    its round (from 1), its median steady step (None: no step measured), its exit code,
    the exception it crashed on (None: none), its run directory, and whether the hooks'
    record shows the fix made (None: the program as written, or not known), its measured
    steps, and its loss by training step (Keras's batch logs; empty: none recorded)."""

    fix: str
    round: int
    step_s: float | None
    returncode: int | None
    crash: str | None
    run_dir: str
    applied: bool | None = None
    steps: int = 0
    losses: Mapping[int, float] = field(default_factory=dict)

    def record(self) -> dict[str, object]:
        """As the report keeps it: the losses left in the trial's own run directory."""
        return {k: v for k, v in asdict(self).items() if k != "losses"}


@dataclass(frozen=True)
class Measured:
    """A fix's B/A over the rounds: the geometric mean, its interval (None: fewer than two
    rounds), each round's, and the median steps of A and B."""

    ratio: float
    low: float | None
    high: float | None
    per_round: tuple[float, ...]
    a_s: float
    b_s: float


def t_quantile(df: int) -> float:
    return T_975[df - 1] if 1 <= df <= len(T_975) else 2.0


def ratio_interval(ratios: Sequence[float]) -> tuple[float, float | None, float | None]:
    """The geometric mean of ``ratios`` and its Student-t interval at CI_LEVEL on their
    logarithms (None, None: fewer than two)."""
    logs = [math.log(r) for r in ratios]
    mean = statistics.fmean(logs)
    if len(logs) < 2:
        return math.exp(mean), None, None
    half = t_quantile(len(logs) - 1) * statistics.stdev(logs) / math.sqrt(len(logs))
    return math.exp(mean), math.exp(mean - half), math.exp(mean + half)


def measure(trials: Sequence[Trial], fix: str) -> Measured | None:
    """``fix``'s B/A from the rounds where both it and the program as written measured a
    step (None: none did)."""
    a = {t.round: t.step_s for t in trials if not t.fix and t.step_s}
    b = {t.round: t.step_s for t in trials if t.fix == fix and t.step_s}
    rounds = sorted(set(a) & set(b))
    if not rounds:
        return None
    per_round = tuple(b[r] / a[r] for r in rounds)
    ratio, low, high = ratio_interval(per_round)
    return Measured(ratio, low, high, per_round, statistics.median(a[r] for r in rounds),
                    statistics.median(b[r] for r in rounds))


def broke(trials: Sequence[Trial], fix: str) -> str | None:
    """The exception a trial of ``fix`` ended on where the same round's program as written
    exited 0 (None: it did not break it); a trial that hung and was ended by gpudiag (no
    exit code of its own, its crash says so) broke it too."""
    ok_rounds = {t.round for t in trials if not t.fix and t.returncode == 0}
    for t in trials:
        ended = t.returncode not in (0, None) or (t.returncode is None and t.crash)
        if t.fix == fix and t.round in ok_rounds and ended:
            return t.crash or f"exit code {t.returncode}"
    return None


def verdict_of(m: Measured | None, broken: str | None, module: object = None) -> str:
    """faster, slower, no change, cannot tell, broke, or not compiled (a fix that compiles
    the step, jit_compile: its trial failed on XLA's compile and is dropped)."""
    if broken is not None:
        failed = getattr(module, "did_not_compile", None)
        return "not compiled" if failed is not None and failed(broken) else "broke"
    if m is None or m.low is None or m.high is None:
        return "cannot tell"
    if m.high < 1.0:
        return "faster"
    if m.low > 1.0:
        return "slower"
    if all(r < 1.0 for r in m.per_round) or all(r > 1.0 for r in m.per_round):
        return "cannot tell"  # every round one way, the rounds too few to decide
    return "no change"


def said(m: Measured, verdict: str) -> str:
    """B/A in words, the right way round: "1.92x faster (95 % CI 1.81-2.04, 3 rounds)"."""
    n = len(m.per_round)
    rounds = f"{n} round{'s' if n != 1 else ''}"
    if m.low is None or m.high is None:
        return f"B/A {m.ratio:.2f} from {rounds}: too few for an interval"
    level = f"{CI_LEVEL * 100:.0f} % CI"
    if verdict == "cannot tell":
        way = "faster" if m.ratio < 1 else "slower"
        return (f"cannot tell: every round {way} (B/A {min(m.per_round):.2f}-"
                f"{max(m.per_round):.2f}), but the {level} {m.low:.2f}-{m.high:.2f} of {rounds} "
                "holds 1.00: more --rounds decide")
    if verdict == "faster":
        return f"{1 / m.ratio:.2f}x faster ({level} {1 / m.high:.2f}-{1 / m.low:.2f}, {rounds})"
    if verdict == "slower":
        return f"{m.ratio:.2f}x slower ({level} {m.low:.2f}-{m.high:.2f}, {rounds})"
    return f"no change: B/A {m.ratio:.2f} ({level} {m.low:.2f}-{m.high:.2f} holds 1.00, {rounds})"


def predicted_text(ratio: float, low: float | None, high: float | None) -> str:
    """A prediction as B/A with its interval: "predicted B/A 0.57 (0.53-1.00)"."""
    span = f" ({low:.2f}-{high:.2f})" if low is not None and high is not None else ""
    return f"predicted B/A {ratio:.2f}{span}"


def prediction_words(chosen: Chosen, m: Measured | None) -> tuple[str, bool | None]:
    """The prediction beside the measurement, and whether the measured B/A fell inside its
    interval (None: no prediction, or no interval, or nothing measured)."""
    if chosen.predicted is None:
        return "no prediction for this fix alone", None
    ratio, low, high = chosen.predicted
    text = predicted_text(ratio, low, high)
    if m is None or low is None or high is None:
        return text, None
    inside = low <= m.ratio <= high
    return f"{text}: measured {m.ratio:.2f}, {'inside' if inside else 'outside'} it", inside


def label(chosen: Chosen) -> str:
    """``num_parallel_calls at train.py:33``."""

    return f"{fix_label(chosen.fix)} at {chosen.fix.file}:{chosen.fix.line}"


def fix_finding(chosen: Chosen, trials: Sequence[Trial]) -> Finding:
    """try.fix.<fix>: the fix measured against the program as written, the change at its
    line, the prediction beside it."""
    from gpudiag.fixes import BY_NAME

    name = chosen.fix.name
    module = BY_NAME[name]
    broken = broke(trials, name)
    verdict = verdict_of(measure(trials, name), broken, module)
    m = None if verdict == "not compiled" else measure(trials, name)  # its trials dropped
    predicted, inside = prediction_words(chosen, m)
    applied = [t.applied for t in trials if t.fix == name and t.applied is not None]
    where = f"{chosen.fix.file}:{chosen.fix.line}"
    if verdict == "not compiled":
        head = f"{label(chosen)}: XLA could not compile the step here: {broken}; dropped"
    elif broken is not None:
        head = f"{label(chosen)}: the fix broke the program here: {broken}"
    elif m is None:
        head = f"{label(chosen)}: no step measured with it"
    else:
        head = f"{label(chosen)}: {said(m, verdict)}"
    parts = [head]
    if m is not None and broken is None:
        parts.append(f"a step {ms_number(m.a_s)} -> {ms_number(m.b_s)} ms (median of the "
                     "rounds' median steps; the interval is from the run-to-run variation "
                     "of B/A across rounds)")
    parts.append(f"as written: `{chosen.as_written}`" if chosen.as_written else
                 "the line as written was not recorded")
    if chosen.as_it_would_be:
        parts.append(f"as it would be: `{chosen.as_it_would_be}`")
    else:
        parts.append(f"the change: {module.FIX.changes}")
    parts.append(predicted)
    loss = trial_loss.compare(trials, name) if module.FIX.can_change_results else None
    if module.FIX.can_change_results and broken is None:
        parts.append(trial_loss.words(loss))
    if applied and not all(applied):
        parts.append("the trial's record does not show the change made in every round")
    status: Status = "ok" if verdict == "faster" else "fail" if verdict == "broke" else "warn"
    loss_ev = {"loss_steps": loss.steps if loss else 0,
               "loss_rel_diff": loss.rel_diff if loss else None,
               "loss_own_rel_diff": loss.own_rel_diff if loss else None}
    evidence = {"fix": name, "where": where, "as_written": chosen.as_written,
                "as_it_would_be": chosen.as_it_would_be, "verdict": verdict,
                "ratio": m.ratio if m else None, "ratio_low": m.low if m else None,
                "ratio_high": m.high if m else None, "per_round": list(m.per_round) if m
                else [], "rounds": len(m.per_round) if m else 0, "level": CI_LEVEL,
                "interval_from": "the run-to-run variation of B/A across rounds",
                "a_step_s": m.a_s if m else None, "b_step_s": m.b_s if m else None,
                "predicted_ratio": chosen.predicted[0] if chosen.predicted else None,
                "predicted_low": chosen.predicted[1] if chosen.predicted else None,
                "predicted_high": chosen.predicted[2] if chosen.predicted else None,
                "inside": inside, "applied": all(applied) if applied else None,
                "can_change_results": module.FIX.can_change_results, "broke": broken,
                "fix_config": asdict(chosen.fix), **loss_ev,
                "trials": [t.run_dir for t in trials if t.fix == name]}
    return Finding(f"try.fix.{name}", status, "; ".join(parts), evidence,
                   title=title(head, f"{fix_label(chosen.fix)}: {short_said(m, verdict)}",
                               f"{fix_label(chosen.fix)}: {verdict}"))


def short_said(m: Measured | None, verdict: str) -> str:
    """B/A in a title's few words: "1.92x faster (95 % CI 1.81-2.04)", "no change, B/A
    0.84 (95 % CI 0.58-1.23)"."""
    if verdict == "broke":
        return "the fix broke the program here"
    if verdict == "not compiled":
        return "XLA could not compile it here"
    if m is None:
        return "no step measured"
    if m.low is None or m.high is None or verdict == "cannot tell":
        return f"cannot tell, B/A {m.ratio:.2f} from {len(m.per_round)} round(s)"
    level = f"{CI_LEVEL * 100:.0f} % CI"
    if verdict == "faster":
        return f"{1 / m.ratio:.2f}x faster ({level} {1 / m.high:.2f}-{1 / m.low:.2f})"
    if verdict == "slower":
        return f"{m.ratio:.2f}x slower ({level} {m.low:.2f}-{m.high:.2f})"
    return f"no change, B/A {m.ratio:.2f} ({level} {m.low:.2f}-{m.high:.2f})"


def shown(ev: TriedFix, head: str) -> list[str]:
    """A tried fix as the terminal shows it after the trials: the measurement (``head``:
    the finding's message up to its first "; "), the line as written and as it would be,
    the prediction beside the measurement."""
    out = [head]
    if ev.as_written:
        out.append(f"  as written:     {ev.as_written}")
    if ev.as_it_would_be:
        out.append(f"  as it would be: {ev.as_it_would_be}")
    if ev.predicted_ratio is not None:
        where = {True: ", inside it", False: ", outside it", None: ""}[ev.inside]
        measured = f": measured {ev.ratio:.2f}{where}" if ev.ratio is not None else ""
        out.append("  " + predicted_text(ev.predicted_ratio, ev.predicted_low,
                                         ev.predicted_high) + measured)
    return out


def decided(chosen: Sequence[Chosen], trials: Sequence[Trial]) -> bool:
    """Whether more rounds can change no fix's verdict: each one's interval already excludes
    1.00 (faster, slower), or its trial broke the program or did not compile."""
    from gpudiag.fixes import BY_NAME

    return bool(chosen) and all(
        verdict_of(measure(trials, c.fix.name), broke(trials, c.fix.name),
                   BY_NAME[c.fix.name]) in ("faster", "slower", "broke", "not compiled")
        for c in chosen)


def first_line(chosen: Sequence[Chosen], trials: Sequence[Trial]) -> str:
    """The answer: the best measured fix ("tried 3 fixes: num_parallel_calls at train.py:33
    makes a step 1.9x faster (95 % CI 1.8-2.0, 3 rounds)"), or "none of the 2 fixes tried
    helped here"."""
    n = len(chosen)
    fixes = f"{n} fix{'es' if n != 1 else ''}"
    best: tuple[float, Chosen, Measured] | None = None
    for c in chosen:
        m = measure(trials, c.fix.name)
        if m is not None and verdict_of(m, broke(trials, c.fix.name)) == "faster" and (
                best is None or m.ratio < best[0]):
            best = (m.ratio, c, m)
    if best is None:
        if any(verdict_of(measure(trials, c.fix.name), broke(trials, c.fix.name))
               == "cannot tell" for c in chosen):
            said = f"none of the {fixes} tried was" if n != 1 else "the 1 fix tried was not"
            return f"{said} shown to help here: too few rounds to decide (more --rounds)"
        return f"none of the {fixes} tried helped here" if n != 1 else \
            "the 1 fix tried did not help here"
    _, c, m = best
    assert m.low is not None and m.high is not None
    rounds = len(m.per_round)
    return (f"tried {fixes}: {label(c)} makes a step {1 / m.ratio:.1f}x faster "
            f"({CI_LEVEL * 100:.0f} % CI {1 / m.high:.1f}-{1 / m.low:.1f}, "
            f"{counted(rounds, 'round')})")


def result_finding(chosen: Sequence[Chosen], trials: Sequence[Trial], stopped_after: int | None,
                   interrupted: bool = False, loop: str = "Model.fit",
                   early_after: int | None = None) -> Finding:
    """try.result: the answer's first line, how the trials were run."""
    line = first_line(chosen, trials)
    helped = line.startswith("tried ")
    how = [line, f"{len(trials)} measured run(s) of the program, the program as written and "
           "each fix interleaved in rounds under the same hooks, with no profiled window"]
    if stopped_after is not None:
        how.append(stopped_words(stopped_after, loop))
    if interrupted:
        how.append("interrupted: only the trials that finished are counted")
    if early_after is not None:
        how.append(f"stopped early after round {early_after}: every fix's interval already "
                   "decided (faster or slower), or its trial failed")
    evidence = {"headline": line, "fixes": [c.fix.name for c in chosen],
                "trials": [t.record() for t in trials], "stopped_after_steps": stopped_after,
                "early_after_round": early_after}
    return Finding("try.result", "ok" if helped else "warn", "; ".join(how), evidence,
                   title=title(line, "a fix tried made the step faster" if helped else
                               "no fix tried made the step faster"))


def stopped_words(steps: int, loop: str) -> str:
    """How ``--steps`` bounded the trials of the diagnosis's judged ``loop`` (its series)."""
    if loop.startswith("Model.fit"):
        return (f"each fit stopped after {counted(steps, 'step')}: the trials did not run to "
                "their end")
    if loop.startswith("tf.function "):
        return (f"each trial's process ended after {counted(steps, 'call')} of its step {loop} (a "
                "custom loop: ended cleanly, its exit handlers run): the trials did not run "
                "to their end")
    return (f"the trials ran {loop} to its end: --steps stops a Keras fit or a step "
            "tf.function only")


def not_tried_finding(not_tried: Sequence[NotTried]) -> Finding | None:
    """try.not-tried: the advised fixes gpudiag does not apply, with their prediction."""
    if not not_tried:
        return None
    said_each = []
    for n in not_tried:
        where = f" at {n.where}" if n.where else ""
        pred = ""
        if n.predicted is not None:
            ratio, low, high = n.predicted
            span = f" ({low:.2f}-{high:.2f})" if low is not None and high is not None else ""
            pred = f", predicted B/A {ratio:.2f}{span}"
        said_each.append(f"{n.what}{where}{pred} ({n.why})")
    one = ([f"not tried, change by hand: {said_each[0].split(' (')[0]}"]
           if len(not_tried) == 1 else [])
    return Finding("try.not-tried", "skip",
                   "not tried: change it by hand: " + "; ".join(said_each),
                   {"not_tried": [asdict(n) for n in not_tried]},
                   title=title(*one, f"not tried: {len(not_tried)} advised fix(es): change "
                               "by hand"))
