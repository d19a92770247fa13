"""Keras calls one at a time from the program's own loop, a bottleneck of its own kind:
``model.predict(state)`` and ``model.fit(state, target, epochs=1)`` per sample pay Keras's
per-call work (data adapter, iterator, callbacks, progress bar) every call, whatever the
model costs. No training loop passes its warm-up there, so the step breakdown has nothing
to say; the calls' own times (gpudiag.inprogram.kerascalls) do.

Pure: the process's call sites (gpudiag.records.run.KerasCallSite) and its duration in,
a finding out; ``proc`` as in gpudiag.verdicts.run.process.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

from gpudiag.layout.units import counted
from gpudiag.records.callsites import KerasCallSite
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.rebuilt import model_rebuilt, rebuilt

MIN_CALLS = 10  # calls at one line: a loop
SMALL_ROWS = 256  # a call's input rows at most: the per-call work is what it pays for
SHARE = 0.5  # of the program's time: the calls dominate it

FIXES = {
    "predict": "call the model directly, `model(x, training=False)` (or "
               "`model.predict_on_batch(x)`), for a single input; batch the inputs where "
               "the loop predicts one at a time",
    "predict_on_batch": "batch the inputs: one call for many samples; `model(x, "
                        "training=False)` for a single one",
    "fit": "train once per minibatch: stack the samples and call `model.train_on_batch(x, "
           "y)` (or one fit) per minibatch, not fit per sample",
    "fit-batches": "one fit over the whole data with epochs=N (a callback to look at each "
                   "epoch), or train_on_batch per minibatch, not a fit call per small chunk",
    "train_on_batch": "one train_on_batch per minibatch: stack the samples, not a call per "
                      "sample",
    "evaluate": "evaluate once over all the data (or `model(x, training=False)` and the "
                "metric), not a call per sample",
    "test_on_batch": "one test_on_batch per minibatch: stack the samples",
    "__call__": "wrap the loop's step in `@tf.function` (the model then runs as one graph a "
                "call) and batch the inputs",
}


def _ms(seconds: float | None) -> str:
    return "?" if seconds is None else f"{seconds * 1e3:.1f} ms"


def _rows(site: KerasCallSite) -> str:
    if site.rows_max is None:
        return ""
    if site.rows_min == site.rows_max:
        return f" for {site.rows_max} row(s) each"
    return f" for {site.rows_min}-{site.rows_max} rows"


def describe(site: KerasCallSite) -> str:
    code = f" (`{site.code}`)" if site.code else ""
    return (f"{counted(site.calls, 'call')} of {site.model}.{site.method} at {site.where}{code}: "
            f"{site.total_s:.1f} s in all, a median {_ms(site.median_s)} a call{_rows(site)}")


def fix_for(site: KerasCallSite) -> str:
    """The fix at a site: a fit of one sample a call is trained per minibatch instead; a
    fit of a few batches a call (one epoch at a time) becomes one fit."""
    if site.method == "fit" and (site.rows_max or 0) > 1:
        return FIXES["fit-batches"]
    return FIXES.get(site.method, FIXES["predict"])


def looped(sites: Sequence[KerasCallSite]) -> list[KerasCallSite]:
    """The sites called many times with small inputs (rows known: a dataset or a generator
    a call spreads Keras's per-call work over its batches): Keras's per-call work each
    time."""
    return [s for s in sites if s.calls >= MIN_CALLS
            and s.rows_max is not None and s.rows_max <= SMALL_ROWS]


def keras_calls(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """run.keras-calls: where many small Keras calls made one at a time took the program's
    time, at their lines, with the fix for each; None where no line called Keras often."""
    loop = looped(obs.keras_calls)
    if not loop:
        return None
    start = obs.first_keras_call_t_unix_s or obs.first_t_unix_s
    program_s = obs.last_t_unix_s - start \
        if start is not None and obs.last_t_unix_s is not None else None
    calls_s = sum(s.total_s for s in loop)
    calls = sum(s.calls for s in loop)
    share = calls_s / program_s if program_s else None
    evidence = {"sites": [asdict(s) for s in loop], "program_s": program_s,
                "calls_s": calls_s, "share": share, "min_calls": MIN_CALLS,
                "share_threshold": SHARE, "calls_left_out": obs.keras_calls_left_out}
    said = "; ".join(describe(s) for s in loop[:4]) + (
        f"; {len(loop) - 4} more line(s)" if len(loop) > 4 else "")
    of = f"{share:.0%} of the program's {program_s:.1f} s from its first Keras call to its " \
        "end" if share is not None and program_s else "of an unknown program time"
    fid = f"run.keras-calls{proc}"
    top = loop[0]
    if share is None:
        return Finding(fid, "skip", f"Keras calls one at a time took {calls_s:.1f} s, "
                       f"{of}: their share cannot be told; {said}", evidence,
                       title=f"Keras calls in a loop: {counted(calls, 'call')}, share not known")
    if share < SHARE:
        return Finding(fid, "ok", f"Keras calls one at a time took {calls_s:.1f} s, {of}: "
                       f"not what the time went to; {said}", evidence,
                       title=f"Keras calls in a loop: {counted(calls, 'call')}, {share:.0%} of "
                             f"the time")
    actions = tuple(Action(fix_for(s), s.where) for s in loop[:3])
    return Finding(
        fid, "warn",
        f"Keras calls made one at a time took {calls_s:.1f} s, {of}: {said}. Each "
        "predict, fit or evaluate call sets up Keras's data adapter, iterator and callbacks "
        "again, however few its rows (how much of a call the model's own ops took was not "
        "measured)",
        evidence, actions=actions,
        title=title(f"Keras calls in a loop: {counted(calls, 'call')}, {share:.0%} of the time, "
                    f"{top.method} at {top.where}",
                    f"Keras calls in a loop: {share:.0%} of the time at {top.where}"),
        advice="; ".join(f"at {s.where}: {fix_for(s)}" for s in loop[:3]) + ".")


MIN_POINTS = 8  # memory readings over the calls before anything is said
LEVEL_BYTES = 8 << 20  # within this (or LEVEL_FRACTION of the last reading): level
LEVEL_FRACTION = 0.03


def _mib(n: float) -> str:
    return f"{n / (1 << 20):.0f} MiB"


def memory_over_calls(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """run.memory-over-calls: the process's resident memory after its Keras calls, from the
    hook's readings: levelled off (no leak, at what and after how many calls) or still
    growing over the second half of the calls. None with too few readings."""
    points = obs.rss_after_calls
    if len(points) < MIN_POINTS:
        return None
    calls, sizes = [c for c, _ in points], [b for _, b in points]
    tol = max(LEVEL_BYTES, LEVEL_FRACTION * sizes[-1])
    mid = len(points) // 2
    evidence = {"rss_after_calls": [list(p) for p in points], "tolerance_bytes": tol}
    fid = f"run.memory-over-calls{proc}"
    late = sizes[-1] - min(sizes[mid:])
    if late <= tol and max(sizes[mid:]) - min(sizes[mid:]) <= 2 * tol:
        i = next(i for i in range(len(sizes)) if max(sizes[i:]) - min(sizes[i:]) <= tol)
        if i == 0:
            return Finding(fid, "ok", f"no leak: the process's memory stayed at "
                           f"{_mib(sizes[-1])} over {calls[-1]} Keras calls", evidence,
                           title=f"no leak: memory flat at {_mib(sizes[-1])} over "
                                 f"{calls[-1]} Keras calls")
        return Finding(fid, "ok", f"no leak: the process's memory rose from "
                       f"{_mib(sizes[0])} after call {calls[0]} and levelled at "
                       f"{_mib(sizes[-1])} after {counted(calls[i], 'call')} (within "
                       f"{_mib(tol)} over "
                       f"the {counted(calls[-1] - calls[i], 'call')} since): allocators and caches "
                       "filling, not a leak", evidence,
                       title=f"no leak: memory levelled at {_mib(sizes[-1])} after "
                             f"{counted(calls[i], 'call')}")
    span = calls[-1] - calls[mid]
    return Finding(
        fid, "warn", f"the process's memory grew by {_mib(late)} over its last {span} Keras "
        f"calls, the second half of the readings ({late / max(span, 1) / 1024:.0f} KiB a "
        "call): not levelled off; "
        f"{_mib(sizes[-1])} after {counted(calls[-1], 'call')}, from {_mib(sizes[0])}; what grows "
        "(the program's Python objects, TensorFlow's allocator, traced functions) was not "
        "measured", evidence,
        title=f"memory still growing over the Keras calls: +{_mib(late)} in "
              f"{counted(span, 'call')}",
        advice=_memory_advice(obs))


def _memory_advice(obs: ProcessObservation) -> str:
    """What to look for; a model built anew at a call site (run.model-rebuilt) first."""
    new = rebuilt(obs.keras_calls)
    first = (f"{new[0].model}.{new[0].method} at {new[0].where} ran on a new model in "
             f"{new[0].models} of its {counted(new[0].calls, 'call')}: build the model once, "
             "before the loop, and restore its first weights each round (run.model-rebuilt). "
             if new else "")
    return (first + "Look for what each call leaves behind: results or tensors appended "
            "to a list, a model or tf.function built anew inside the loop, a replay memory "
            "without maxlen; tracemalloc.take_snapshot() at two points of the loop shows "
            "which Python objects grow.")


def findings(obs: ProcessObservation, proc: str = "") -> list[Finding]:
    """The Keras-call findings of one process (each absent where there is nothing to say)."""
    return [f for f in (keras_calls(obs, proc), model_rebuilt(obs, proc),
                        memory_over_calls(obs, proc)) if f is not None]
