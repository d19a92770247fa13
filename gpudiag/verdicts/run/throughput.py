"""`gpudiag run`'s step time: each loop's steady-state start-to-start period, the step
call's own share of it, and examples/s from the period (run.throughput; the cluster's
tasks read the same loop_timing). Pure functions of gpudiag.records.run."""

from __future__ import annotations

import itertools
import statistics
from collections.abc import Collection, Sequence
from typing import Any

from gpudiag.layout.units import CI_LEVEL, counted, duration
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Finding
from gpudiag.verdicts import stats
from gpudiag.verdicts.common import title


def unseen_fit_batches(obs: ProcessObservation) -> str | None:
    """Why no step of a fit that ran was seen: its epochs were recorded but not its
    batches (tf_keras refuses a callback with batch-level hooks under
    ParameterServerStrategy, so gpudiag's fit recorder stands aside from them)."""
    for s in obs.series:
        if s.kind == "fit" and s.epochs and not s.steps and \
                "ParameterServer" in str(s.facts.get("strategy")):
            per_epoch = (s.facts.get("params") or {}).get("steps")
            steps = f" ({counted(per_epoch * len(s.epochs), 'step')})" \
                if isinstance(per_epoch, int) else ""
            return (f"{s.label} ran {len(s.epochs)} epoch(s){steps} under "
                    f"{s.facts['strategy']}, but its batches "
                    "were not seen: tf_keras refuses callbacks with batch-level hooks "
                    "there, so gpudiag recorded its epochs only")
    return None


def steady(first: int, last: int, warmup: int, skip: Collection[int]) -> bool:
    """The one steady-state rule, run.throughput's and `gpudiag diff`'s: the period from
    the start of step ``first`` to the start of step ``last`` counts when ``first`` is
    past the ``warmup`` steps and no step of ``skip`` (the profiled ones) is within one
    step of it (the profiler starts and stops inside those periods)."""
    return first >= warmup and not set(skip) & set(range(first - 1, last + 1))


def _periods(series: StepSeries, warmup: int, skip: Sequence[int]
             ) -> list[tuple[float, float | None]]:
    """(start-to-start period, the step call's own time) of each steady-state step: after
    ``warmup``, not traced, the profiled steps and the ones just before and after them left
    out (the profiler starts and stops inside those periods, by gpudiag's clock or by a
    clock the program reads in a callback of its own), and, for fit, within one epoch.
    An aggregated row (inprogram.recorder.StepBuffer: the last of ``count`` steps, its call
    time their median) stands for the ``count`` periods since the row before it, each the
    span's mean. A fit call of ``steps_per_execution`` = N steps (``Step.per_call``)
    stands for N steps of a Nth of its period and of its call time each."""
    ordered = sorted(series.steps, key=lambda s: s.index)
    skipped = set(skip)
    out: list[tuple[float, float | None]] = []
    for prev, row in itertools.pairwise(ordered):
        n = row.index - prev.index
        if n < 1 or n != row.count or prev.traced \
                or prev.start_unix_s is None or row.start_unix_s is None \
                or row.epoch != prev.epoch or not steady(prev.index, row.index, warmup, skipped):
            continue
        span = row.start_unix_s - prev.start_unix_s
        if n == 1:  # a call of steps_per_execution steps: N steps of a Nth each
            k = prev.per_call
            call = None if prev.duration_s is None else prev.duration_s / k
            out += [(span / k, call)] * k
        else:
            k = row.per_call
            call = None if row.duration_s is None else row.duration_s / k
            out += [(span / (n * k), call)] * (n * k)
    return out


INPUT_BLOCK = 10  # steps per block of the input share's spread


BOOTSTRAP = 400  # resamples of the blocks for the share's interval (seeded: the same data,
# the same interval)


def _share(blocks: list[list[tuple[float, float]]], pairs: list[tuple[float, float]]
           ) -> tuple[float, float | None, float | None]:
    """One statistic for the share and its spread: the whole run's ratio of the waits'
    sum to the periods' sum, with the 95 % percentile interval of that same ratio over
    resamples of its blocks of INPUT_BLOCK steps (a block bootstrap, from 6 blocks;
    fewer: no interval)."""
    import random

    share = sum(w for _, w in pairs) / sum(p for p, _ in pairs)
    sums = [(sum(w for _, w in b), sum(p for p, _ in b)) for b in blocks]
    if len(sums) < 6:
        return share, None, None
    rng = random.Random(0)
    ratios = []
    for _ in range(BOOTSTRAP):
        pick = [sums[rng.randrange(len(sums))] for _ in sums]
        ratios.append(sum(w for w, _ in pick) / sum(p for _, p in pick))
    ratios.sort()
    return share, ratios[int(0.025 * BOOTSTRAP)], ratios[int(0.975 * BOOTSTRAP) - 1]


def input_series(series: StepSeries, warmup: int, skip: Sequence[int] = ()
                 ) -> dict[str, Any] | None:
    """The share of the steady-state step periods the program spent in ``next(iterator)``
    (its rows' ``wait_s``: gpudiag.inprogram.inputwait), over the whole timed run: the
    ratio of the sums, with the 95 % interval of that same ratio over resampled blocks of
    INPUT_BLOCK consecutive steps (from 6 blocks). When next()'s
    own cost on a full buffer was measured (the series' ``next_floor``), ``hidden`` is the
    same statistic of the wait beyond that floor, a call: the part prefetch can hide; the
    floor is not input waited for. None: the loop's rows have no wait (Keras fit takes its
    batches in its graph)."""
    ordered = sorted(series.steps, key=lambda s: s.index)
    skipped = set(skip)
    pairs = []
    for prev, row in itertools.pairwise(ordered):
        if row.wait_s is None or row.index - prev.index != 1 or row.count != 1 \
                or prev.index < warmup or prev.start_unix_s is None \
                or row.start_unix_s is None or skipped & {prev.index - 1, prev.index,
                                                           row.index}:
            continue
        pairs.append((row.start_unix_s - prev.start_unix_s, row.wait_s))
    kept = pairs
    total = sum(span for span, _ in kept)
    if total <= 0:
        return None
    blocks = [kept[i:i + INPUT_BLOCK] for i in range(0, len(kept), INPUT_BLOCK)]
    blocks = [b for b in blocks if len(b) == INPUT_BLOCK]
    share, low, high = _share(blocks, kept)
    waits = sorted(w for _, w in kept)
    out: dict[str, Any] = {
        "share": share, "steps": len(kept), "blocks": len(blocks), "low": low,
        "high": high, "statistic": "whole run",
        "wait_s_per_step": sum(waits) / len(waits),
        "wait_s_median": statistics.median(waits), "wait_s_p10": waits[len(waits) // 10],
        "floor": None, "hidden": None}
    floor = (series.facts.get("next_floor") or {}).get("floor_s")
    if isinstance(floor, (int, float)):
        def beyond(b: list[tuple[float, float]]) -> list[tuple[float, float]]:
            return [(p, max(0.0, w - floor)) for p, w in b]
        h_share, h_low, h_high = _share([beyond(b) for b in blocks], beyond(kept))
        out["floor"] = dict(series.facts["next_floor"])
        out["hidden"] = {"share": h_share, "low": h_low, "high": h_high,
                         "wait_s_per_step": sum(max(0.0, w - floor) for w in waits)
                         / len(waits)}
    return out


def step_times(series: StepSeries, warmup: int, skip: Sequence[int] = ()) -> list[float]:
    """Seconds per step after ``warmup`` steps, the profiled ones (``skip``) left out: the
    steady-state period between step starts (for every loop: fit, tf.function, Session.run),
    which holds the input and Python work between calls as well as the call itself."""
    return [period for period, _ in _periods(series, warmup, skip)]


def loop_timing(obs: ProcessObservation, series: StepSeries, warmup: int
                ) -> dict[str, Any] | None:
    """A loop's timed steps (after ``warmup``, its profiled steps left out): median and
    p90 step period, the step call's own median time and its share of the period,
    steps/s and, when the batch is known, examples/s (from the period). None: none timed."""
    skip = obs.profile.steps if obs.profile and obs.profile.source == series.label else []
    pairs = _periods(series, warmup, skip)
    times = [period for period, _ in pairs]
    if not times:
        return None
    median = statistics.median(times)
    interval = stats.median_ci(times)
    calls = [call for _, call in pairs if call is not None]
    call = statistics.median(calls) if calls else None
    row: dict[str, Any] = {"series": series.label, "timed_steps": len(times),
                           "step_s_median": median,
                           # the median's interval (gpudiag.verdicts.stats.median_ci; None:
                           # too few steps): with it, the median is "the step" of the loop
                           "step_s_low": interval[0] if interval else None,
                           "step_s_high": interval[1] if interval else None,
                           "step_s_mean": statistics.fmean(times),
                           "step_s_p90": sorted(times)[int(0.9 * (len(times) - 1))],
                           "call_s_median": call,
                           "call_share": call / median if call is not None and median > 0
                           else None,
                           "steps_per_s": 1 / median if median > 0 else None,
                           "batch_size": series.batch_size,
                           "steps_per_call": max((s.per_call for s in series.steps), default=1),
                           # the steady-state rule's inputs (steady): `gpudiag diff` uses them
                           "warmup_steps": warmup, "left_out_steps": sorted(skip)}
    if series.batch_size and median > 0:
        row["examples_per_s"] = series.batch_size / median
    waits = input_series(series, warmup, skip)
    if waits is not None:
        row["input"] = waits
    return row


def throughput(obs: ProcessObservation, warmup: int, proc: str = "") -> Finding:
    """Steps per second, step time and examples per second of each training loop."""
    profiled = obs.profile.steps if obs.profile else []
    rows, parts = [], []
    for s in obs.series:
        row = loop_timing(obs, s, warmup)
        if row is None:
            continue
        text = f"{s.label}: {counted(row['timed_steps'], 'step')}, median " \
               f"{duration(row['step_s_median'])}/step (start to start)"
        if row["steps_per_call"] > 1:
            text += f" ({row['steps_per_call']} steps per call of the step function: " \
                    "each call's time over them)"
        if row["call_share"] is not None:
            text += f", the step call {duration(row['call_s_median'])} " \
                    f"({pct(row['call_share'])} of it)"
        if "examples_per_s" in row:
            text += f", {row['examples_per_s']:,.0f} examples/s (batch {s.batch_size})"
        if "input" in row:
            w = row["input"]
            spread = f", {pct(w['low'])}-{pct(w['high'])} over blocks of {INPUT_BLOCK} " \
                "steps" if w["low"] is not None else ""
            text += f", {pct(w['share'])} of it in next(iterator){spread}"
            if w["hidden"] is not None:
                text += (f" ({pct(w['hidden']['share'])} beyond next()'s own "
                         f"{duration(w['floor']['floor_s'])} a call on a full buffer)")
        for p in s.facts.get("py_input") or []:  # Keras's Python data (inprogram.pydata)
            if p.get("median_s") is not None and row["step_s_median"] > 0:
                kind = "PyDataset" if p["source"] == "PyDataset" else "generator"
                text += (f", {pct(p['median_s'] / row['step_s_median'])} of it taking a "
                         f"batch from the {kind} {p['class']} ({duration(p['median_s'])}, "
                         f"median of {counted(p['batches'], 'batch')})")
                if p.get("cpu_where") == "workers" and p.get("cpu_median_s") is not None:
                    text += (f", its {p['workers']} thread workers' __getitem__ "
                             f"{duration(p['cpu_median_s'])} of CPU a batch")
        if row["step_s_low"] is not None:  # the loop's step: this median, with its interval
            text += (f"; the median step's {CI_LEVEL * 100:.0f} % CI "
                     f"{duration(row['step_s_low'])}-{duration(row['step_s_high'])}")
        rows.append(row)
        parts.append(text)
    evidence = {"loops": rows, "warmup_steps": warmup, "profiled_steps": profiled}
    if not rows:
        top = max(obs.series, key=lambda s: len(s.steps), default=None)
        if top is not None and len(top.steps) > warmup and profiled:
            return Finding(f"run.throughput{proc}", "skip", f"{top.label} ran {len(top.steps)} "
                           f"steps, but every step after its {counted(warmup, 'warm-up step')} "
                           f"was in "
                           f"the profiled window (steps {profiled[0]}-{profiled[-1]}), which "
                           "is not timed", evidence,
                           title="no step timed: every step after warm-up was profiled")
        unseen = unseen_fit_batches(obs)
        return Finding(f"run.throughput{proc}", "skip", unseen
                       or f"no training loop ran more than "
                          f"{counted(warmup, 'warm-up step')}", evidence,
                       title="no step timed: Keras fit's batches were not seen" if unseen else
                       f"no training loop ran more than {counted(warmup, 'warm-up step')}")
    busiest = max(rows, key=lambda r: r["timed_steps"])
    rate = (f", {busiest['examples_per_s']:,.0f} examples/s" if "examples_per_s" in busiest
            else "")
    steps = (f"{duration(busiest['step_s_median'])} a step (median of "
             f"{busiest['timed_steps']}){rate}")
    more = f" (+{len(rows) - 1} more loop(s))" if len(rows) > 1 else ""
    return Finding(f"run.throughput{proc}", "ok",
                   "; ".join(parts) + f" (the first {counted(warmup, 'step')} and the profiled "
                                      f"ones "
                   "left out)", evidence,
                   title=title(f"{busiest['series']}: {steps}{more}", f"{steps}{more}", steps))
