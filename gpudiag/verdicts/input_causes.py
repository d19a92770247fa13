"""The input family of a slow step's causes: input-bound, held to xprof's threshold over
the whole run where the loop's waits were measured (the program's next(iterator), beyond
next()'s own cost on a full buffer), else over the profiled window, or over the whole run's
steps where a Keras fit's window missed the wait (window_missed); its fixes at the
program's tf.data lines (gpudiag.verdicts.pipeline). The records and thresholds are
gpudiag.verdicts.step_causes'.
"""

from __future__ import annotations

import statistics
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.layout.units import share as pct
from gpudiag.readers.steprecords import StepParts
from gpudiag.report import Action
from gpudiag.verdicts import stats
from gpudiag.verdicts.pipeline import (
    MODELLED,
    parallel_and_prefetched,
    pipeline_fixes,
    python_ops,
    random_ops,
    stage_fixes,
)
from gpudiag.verdicts.pipeline import fixes as pipeline_fix_list
from gpudiag.verdicts.step_causes import (
    INPUT_BOUND,
    INPUT_MODERATE,
    Cause,
    Judged,
    ProgramFacts,
    ms,
    near_words,
)

UNREPRESENTATIVE = 1.5  # the run's steps this much longer than the window's: not its state


MIN_RUN_PERIODS = 20


def window_missed(facts: ProgramFacts, m: StepParts) -> dict[str, Any] | None:
    """A Keras fit's input share over the whole run, when its profiled window did not see
    the run's steady state (None: it did, or nothing to hold it to).

    A fit takes its batches inside its own graph, so no Python ``next()`` is timed and
    only the window's few steps show the input wait. Those steps can be served from a
    full buffer (tf.data prefetches, and the profiler's start is a pause in which the
    pipeline runs ahead): on this project's machine one run of a serial-map fit whose steps
    wait for input 70-80 % had a window of 4 steps that waited 1 %. When the run's median step
    (95 % CI) is clearly longer than the window's (UNREPRESENTATIVE times, its whole
    interval), the time a step spends beyond the window's work other than input is the
    wait the window missed: share = 1 - (window's step - window's input) / run's step, with
    its interval from the run's median's."""
    if facts.input_series is not None or len(facts.run_periods) < MIN_RUN_PERIODS \
            or m.period_s <= 0 or m.share(m.input_s) >= INPUT_BOUND:
        return None
    ci = stats.median_ci(facts.run_periods)
    run = statistics.median(facts.run_periods)
    if ci is None or ci[0] < UNREPRESENTATIVE * m.period_s:
        return None
    other = max(0.0, m.period_s - m.input_s)
    return {"share": max(0.0, 1 - other / run), "low": max(0.0, 1 - other / ci[0]),
            "high": max(0.0, 1 - other / ci[1]), "run_step_s": run,
            "run_steps": len(facts.run_periods), "window_step_s": m.period_s,
            "window_other_s": other, "window_share": m.share(m.input_s),
            "statistic": "the run's steps against the window's"}


def _missed_words(e: dict[str, Any]) -> str:
    return (f" over the whole run: its steps took {ms(e['run_step_s'])} (median of "
            f"{e['run_steps']}, {pct(e['low'])}-{pct(e['high'])} from its 95 % CI), the "
            f"profiled window's {ms(e['window_step_s'])}, of which "
            f"{ms(e['window_other_s'])} not waiting for input: the rest of a step is the "
            f"wait the window did not see (its own steps waited {pct(e['window_share'])}; "
            "a fit takes its batches inside its graph, so only the window times them)")


def input_share(facts: ProgramFacts, m: StepParts) -> tuple[float, str, bool]:
    """The input share that decides, what it is read from, and whether its spread holds
    xprof's input-bound threshold (then the verdict says so instead of flipping). Over the
    whole run, when next()'s own cost on a full buffer was measured, only the wait beyond
    it is input waited for (prefetch cannot hide the rest)."""
    w = facts.input_series
    if w is None:
        missed = facts.window_input
        if missed is not None:
            return missed["share"], _missed_words(missed), input_against(facts, m).near
        return m.share(m.input_s), "", False
    d = w.get("hidden") or w
    spread = (f", {pct(d['low'])}-{pct(d['high'])} over blocks of steps"
              if d.get("low") is not None else "")
    near = input_against(facts, m).near
    floor = ""
    if w.get("hidden") is not None:
        floor = (f", {pct(w['share'])} with next()'s own {ms(w['floor']['floor_s'])} a call "
                 "on a full buffer (measured), which prefetch cannot hide")
    return d["share"], (f" over the whole run ({counted(w['steps'], 'step')}, the program's "
                        f"next(iterator) {ms(w['wait_s_per_step'])} a step{spread}{floor}; "
                        f"the profiled window: {pct(m.share(m.input_s))})"), near


def floor_note(facts: ProgramFacts) -> str | None:
    """next()'s own cost when it is a sizeable share of the step though the input is
    ready: not input to hide, a per-call cost to pay less often (None: not measured or
    small)."""
    w = facts.input_series
    if w is None or w.get("hidden") is None:
        return None
    own = w["share"] - w["hidden"]["share"]
    if own < INPUT_MODERATE:
        return None
    return (f"next(iterator) takes {ms(w['wait_s_median'])} a call (median; {pct(own)} of "
            f"the step) though its batch is ready: its own cost on a full buffer, "
            f"{ms(w['floor']['floor_s'])} measured, which prefetch cannot hide")


def input_against(facts: ProgramFacts, m: StepParts,
                  j: Judged | None = None) -> stats.Against:
    """The input share against xprof's INPUT_BOUND: over the whole run with its interval
    over resampled blocks of steps where the loop's waits were measured (gpudiag.verdicts.
    run.throughput.input_series; the wait beyond next()'s own cost on a full buffer where
    that was measured), else the profiled window's with its steps' (``j``)."""
    w = facts.input_series
    if w is not None:
        d = w.get("hidden") or w
        interval = (d["low"], d["high"]) if d.get("low") is not None else None
        return stats.against(d["share"], interval, INPUT_BOUND,
                             f"95 % CI over {w.get('blocks')} blocks of steps"
                             if interval else "")
    missed = facts.window_input
    if missed is not None:
        return stats.against(missed["share"], (missed["low"], missed["high"]), INPUT_BOUND,
                             f"from the 95 % CI of the run's median step "
                             f"({counted(missed['run_steps'], 'step')})")
    if j is not None:
        return j.against(lambda s: s.input_s, INPUT_BOUND)
    return stats.against(m.share(m.input_s), None, INPUT_BOUND)


def input_bound(j: Judged) -> Cause | None:
    m = j.m
    share, source, _ = input_share(j.facts, m)
    a = input_against(j.facts, m, j)
    near = a.near
    if a.side == stats.BELOW:
        return None
    calls = j.facts.calls
    fixes = pipeline_fixes(calls, j.facts.epochs)
    listed = pipeline_fix_list(calls, j.facts.epochs)
    actions = [Action(f.what, f.where) for f in listed]
    sized = next((i for i, f in enumerate(listed) if f.kind in MODELLED), None)
    out = []
    top = j.b.xprof.input_ops[0] if j.b.xprof and j.b.xprof.input_ops else None
    if top is not None:
        out.append(f"tf.data's time goes to {top.name} ({pct(top.self_share)} of the "
                   "input pipeline, xprof)")
    out += fixes
    if parallel_and_prefetched(calls):
        mapped = next((c for c in calls if c.method == "map" and c.caller
                       and c.caller.get("direct")), None)
        if not any(f.kind == "python" for f in listed):  # else said at the map
            actions.append(Action("vectorise the map: batch before it, with a function "
                                  "written for a batch", mapped.where if mapped else None))
        cache = ("" if any(random_ops(c) or python_ops(c) or c.method == "shuffle"
                           for c in calls) else
                 "cache() after the map when the data fits in memory, ")
        out.append("the program's pipeline already maps in parallel and prefetches: the "
                   "per-element work itself outruns the step; vectorise it (batch before "
                   "the map, with a function written for a batch: one call maps the whole "
                   f"batch), {cache}make the per-element ops fewer or cheaper, or "
                   "preprocess offline")
    elif not any(x.caller and x.caller.get("direct") for x in calls):
        out += stage_fixes(j.b.xprof.input_ops if j.b.xprof else [])
        out.append("the program's tf.data calls were not recorded: see the input pipeline "
                   "in TensorBoard's Profile tab")
    if source:
        text = f"{pct(share)} of the step waits for input{source}{near_words(a)}"
        missed = j.facts.window_input
        return Cause("input-bound", share, f"input-bound: {text}", "; ".join(out),
                     {"input_series": j.facts.input_series, "near_threshold": near,
                      "against": a.to_dict(), "window_input": missed}
                     | ({"step_s": missed["run_step_s"]} if missed else {}),
                     tuple(actions), sized)
    return Cause("input-bound", m.share(m.input_s),
                 f"input-bound: {pct(m.share(m.input_s))} of the step ({ms(m.input_s)} of "
                 f"{ms(m.period_s)}) waits for input{near_words(a)}", "; ".join(out),
                 {"near_threshold": near, "against": a.to_dict()}, tuple(actions), sized)
