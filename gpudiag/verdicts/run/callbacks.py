"""run.callbacks: the program's own Keras callbacks (and Keras's own ones it passed to fit),
their batch hooks' time per step against the step period, measured over the whole run by
the hooks (gpudiag.inprogram.callbacktimes); each named at the program's line with the
fix there. :func:`callback_causes` gives the same as causes of the profiled loop's step
for run.bottleneck.

Threshold: a callback whose batch hooks take at least CALLBACK_SHARE of the step period is
named. Pure functions of gpudiag.records.run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import duration, share
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.host_common import cause_actions, fit_wall_s, line, predicted, where
from gpudiag.verdicts.run.throughput import loop_timing
from gpudiag.verdicts.step_causes import Cause, ms

CALLBACK_SHARE = 0.10  # of the step period in one callback's batch hooks
BATCH = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


def callback_facts(obs: ProcessObservation, s: StepSeries, warmup: int
                   ) -> list[dict[str, Any]]:
    """Each of the program's callbacks in a fit: its batch hooks' time per step against
    the step period (the whole run's: a save every N batches included), that time against
    the fit's wall time, a typical batch's (the median call: what a profiled window of a
    few steps sees), its epoch hooks' time per epoch."""
    callbacks = s.facts.get("callbacks") or []
    if s.kind != "fit" or not callbacks:
        return []
    timing = loop_timing(obs, s, min(warmup, len(s.steps) // 3))
    period = timing["step_s_median"] if timing else None
    steps = max(1, sum(st.count for st in s.steps))
    epochs = max(1, len(s.epochs))
    fit_s = fit_wall_s(s)
    out = []
    for c in callbacks:
        methods = c.get("methods") or {}
        batch_methods = [m for n, m in methods.items() if n in BATCH]
        batch = sum(m["total_s"] for m in batch_methods)
        epoch = sum(m["total_s"] for n, m in methods.items() if n not in BATCH)
        typical = sum(m.get("median_s") or 0.0 for m in batch_methods) \
            if all(m.get("median_s") is not None for m in batch_methods) else None
        per_step = batch / steps
        out.append({"class": c.get("class"), "file": c.get("file"), "line": c.get("line"),
                    "code": c.get("code"), "builtin": bool(c.get("builtin")),
                    "settings": c.get("settings") or {},
                    "batch_s_per_step": per_step, "epoch_s_per_epoch": epoch / epochs,
                    "batch_s": batch, "batch_max_s": max((m["max_s"] for m in batch_methods),
                                                         default=0.0),
                    "fit_s": fit_s, "fit_share": batch / fit_s if fit_s else None,
                    "typical_s_per_step": typical,
                    "typical_share": typical / period if period and typical is not None
                    else None,
                    "step_s_median": period,
                    "share": per_step / period if period else None, "methods": methods})
    return sorted(out, key=lambda c: -(c["share"] or 0.0))


def _callback_text(c: dict[str, Any]) -> str:
    if c.get("builtin"):
        shown = ", ".join(f"{k}={v!r}" for k, v in c["settings"].items()
                          if k in ("save_freq", "update_freq", "histogram_freq"))
        name = f"{c['class']} (Keras's own, passed to fit at {where(c)}" + \
            (f"; {shown})" if shown else ")")
    else:
        name = f"{c['class']} ({where(c)})"
    text = f"{name} takes {ms(c['batch_s_per_step'])} per step in its batch hooks"
    if c["share"] is not None:
        text += f", {pct(c['share'])} of the {ms(c['step_s_median'])} step"
    if c.get("fit_share") is not None and c.get("typical_s_per_step") is not None and \
            c["batch_max_s"] > 10 * max(c["typical_s_per_step"], 1e-6):
        text += (f" (over the whole fit: {c['batch_s']:.2f} s of its {c['fit_s']:.2f} s, "
                 f"{pct(c['fit_share'])}; a typical batch {ms(c['typical_s_per_step'])}, the "
                 f"slowest {ms(c['batch_max_s'])}: rare expensive batches)")
    if c["epoch_s_per_epoch"] > 0:
        text += f", and {ms(c['epoch_s_per_epoch'])} per epoch in its epoch hooks"
    return text


def _builtin_fix(c: dict[str, Any]) -> str:
    """Keras's own callback: what its arguments at the program's line can change, with
    what the program already set."""
    cls, at, settings = c["class"], where(c), c["settings"]
    freq = settings.get("save_freq")
    if cls == "ModelCheckpoint":
        often = (f"it already saves every {freq} batches (save_freq={freq}): save less "
                 f"often (save_freq={int(freq) * 10} or 'epoch')" if isinstance(freq, int)
                 and not isinstance(freq, bool) else "save less often (save_freq='epoch')")
        weights = "" if settings.get("save_weights_only") else \
            ", or only the weights (save_weights_only=True, a .weights.h5 path)"
        return (f"ModelCheckpoint at {at}: each save took up to {ms(c['batch_max_s'])}; "
                f"{often}{weights}")
    if cls == "TensorBoard":
        parts = []
        if settings.get("update_freq") not in (None, "epoch"):
            parts.append(f"write less often (update_freq='epoch' instead of "
                         f"{settings['update_freq']!r})")
        if settings.get("histogram_freq"):
            parts.append("histogram_freq=0 (histograms of every weight)")
        if settings.get("profile_batch") not in (None, 0, "0", False):
            parts.append("profile_batch=0 once the profile is taken")
        return f"TensorBoard at {at}: " + ("; ".join(parts) or "its per-batch writing is "
                                             "set by its arguments (update_freq)")
    return (f"{cls} is Keras's own (passed to fit at {at}): its per-batch cost is set by its "
            "arguments there; leave it out of fits that are timed, or run it less often")


def _callback_fix(c: dict[str, Any]) -> str:
    if c.get("builtin"):
        return _builtin_fix(c)
    return (f"make {c['class']}'s per-batch work ({where(c)}) cheaper or less frequent: do "
            "it every N batches (if batch % N == 0), or in on_epoch_end; a model.predict or "
            ".numpy() there runs a whole extra step (or waits for the device) every batch")


def callback_causes(facts: Sequence[dict[str, Any]]) -> list[Cause]:
    return [Cause("callbacks", c["share"], f"a callback: {_callback_text(c)}",
                  _callback_fix(c), {"callback": c, "window_share": c["typical_share"],
                                     "predicted": predicted(
                      "callbacks", f"{c['class']}'s batch work moved off the batches",
                      c["step_s_median"], (c["step_s_median"] or 0.0) - c["batch_s_per_step"],
                      "step period - the callback's batch hooks' time per step (both "
                      "measured over the whole run)", {"callback_s": c["batch_s_per_step"]})},
                  (Action(f"do {c['class']}'s per-batch work every N batches or in "
                          "on_epoch_end", line(c)),))
            for c in facts if c["share"] is not None and c["share"] >= CALLBACK_SHARE]


def callbacks(obs: ProcessObservation, warmup: int, proc: str = "") -> Finding:
    found = [c for s in obs.series for c in callback_facts(obs, s, warmup)]
    check = f"run.callbacks{proc}"
    if not found:
        return Finding(check, "skip", "no Keras fit with callbacks of the program's own that "
                       "override a batch or epoch hook", {"callbacks": []},
                       title="no Keras callback of the program's own")
    named = callback_causes(found)
    evidence = {"callbacks": found, "threshold": CALLBACK_SHARE}
    if named:
        return Finding(check, "warn", "; ".join(_callback_text(c.evidence["callback"])
                                                for c in named), evidence,
                       actions=cause_actions(named),
                       advice="; ".join(c.advice for c in named),
                       title=_callback_title(named[0].evidence["callback"]))
    return Finding(check, "ok", "; ".join(_callback_text(c) for c in found), evidence,
                   title=title(f"callbacks: {len(found)} of the program's, none takes "
                               f"{share(CALLBACK_SHARE)} of a step",
                               "callbacks: none slows the steps"))


def _callback_title(c: dict[str, Any]) -> str:
    cost = f"{share(c['share'])} of a {duration(c['step_s_median'])} step"
    return title(f"callback {c['class']} takes {cost}", f"a Keras callback takes {cost}")
