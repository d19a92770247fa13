"""`gpudiag diff`'s step times (the judging is gpudiag.verdicts.diff's): each side's
steady median step with its interval (the first WARMUP steps left out where the series is
long enough, or run.throughput's own rule where the run recorded it), B / A with its
interval (gpudiag.verdicts.stats.ratio_ci): faster, slower, or "no change" when the
interval holds 1.00; examples/s; the diff.step-time.<loop> finding.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict

from gpudiag.layout.diff import CI_LEVEL, LoopDiff, Median
from gpudiag.layout.units import counted, duration, ms_number, share
from gpudiag.report import Finding
from gpudiag.rundir.records import Loop
from gpudiag.verdicts.common import slug, title
from gpudiag.verdicts.run.throughput import steady
from gpudiag.verdicts.stats import median_ci, ratio_ci

WARMUP = 10  # a run that records no warm-up (scaling): steps left out at a series' start


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
    return Finding(f"diff.step-time.{slug(d.name_b)}",
                   "warn" if d.verdict == "slower" else "ok", text, asdict(d),
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
