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

from gpudiag.records.run import KerasCallSite, ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title

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
    return (f"{site.calls} calls of {site.model}.{site.method} at {site.where}{code}: "
            f"{site.total_s:.1f} s in all, a median {_ms(site.median_s)} a call{_rows(site)}")


def looped(sites: Sequence[KerasCallSite]) -> list[KerasCallSite]:
    """The sites called many times with small inputs: Keras's per-call work each time."""
    return [s for s in sites if s.calls >= MIN_CALLS
            and (s.rows_max is None or s.rows_max <= SMALL_ROWS)]


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
                       title=f"Keras calls in a loop: {calls} calls, share not known")
    if share < SHARE:
        return Finding(fid, "ok", f"Keras calls one at a time took {calls_s:.1f} s, {of}: "
                       f"not what the time went to; {said}", evidence,
                       title=f"Keras calls in a loop: {calls} calls, {share:.0%} of the time")
    actions = tuple(Action(FIXES.get(s.method, FIXES["predict"]), s.where) for s in loop[:3])
    return Finding(
        fid, "warn",
        f"Keras calls made one at a time took {calls_s:.1f} s, {of}: {said}. Each "
        "predict, fit or evaluate call sets up Keras's data adapter, iterator and callbacks "
        "again, however few its rows (how much of a call the model's own ops took was not "
        "measured)",
        evidence, actions=actions,
        title=title(f"Keras calls in a loop: {calls} calls, {share:.0%} of the time, "
                    f"{top.method} at {top.where}",
                    f"Keras calls in a loop: {share:.0%} of the time at {top.where}"),
        advice="; ".join(f"at {s.where}: {FIXES.get(s.method, FIXES['predict'])}"
                         for s in loop[:3]) + ".")
