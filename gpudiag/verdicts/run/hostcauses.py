"""The host-side causes of a slow step that the step series shows, with no trace needed:
retracing (run.retracing), an eager training loop (run.eager-loop) and the program's own
Keras callbacks (run.callbacks). Each is measured over the whole run by the hooks
(gpudiag.inprogram.functions / tracing, eagersteps, callbacktimes); each finding names the
program's line and the fix there. :func:`loop_causes` gives the same as causes of the
profiled loop's step for run.bottleneck (gpudiag.verdicts.step_causes.Cause).

Thresholds: a function traced at least RETRACES_WARN times after its first trace, with
its tracing at least TRACE_SHARE of its calls' time, retraces; a callback whose batch
hooks take at least CALLBACK_SHARE of the step period is named. Pure functions of
gpudiag.records.run.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpudiag.layout.units import counted, duration, share
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding
from gpudiag.verdicts.bottleneck import eager_where
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.throughput import loop_timing
from gpudiag.verdicts.step_causes import Cause, ms
from gpudiag.verdicts.whatif import as_prediction

RETRACES_WARN = 2  # retraces (traces after the first) before retracing is a cause
TRACE_SHARE = 0.10  # of the function's calls' time spent tracing
CALLBACK_SHARE = 0.10  # of the step period in one callback's batch hooks
WARNING = re.compile(r"calls to <function (?P<name>[\w.<>]+) at 0x[0-9a-f]+> triggered "
                     r"tf.function retracing")


def where(at: dict[str, Any] | None) -> str:
    if not at or not at.get("file"):
        return "?"
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at.get('line')}"


def _code(at: dict[str, Any] | None) -> str:
    return f" (`{at['code']}`)" if at and at.get("code") else ""


# ------------------------------------------------------------------------- retracing
def retrace_facts(s: StepSeries, obs: ProcessObservation) -> dict[str, Any] | None:
    """A step function's traces over its calls, their time and what changed; None when it
    is no function or was never traced again."""
    if s.kind != "function":
        return None
    retraces = s.facts.get("retraces") or []
    calls = sum(st.count for st in s.steps)
    traced = [st for st in s.steps if st.tracing]
    if not retraces or calls == 0:
        return None
    call_total = sum((st.duration_s or 0.0) * st.count for st in s.steps)
    trace_total = sum(r.get("trace_s") or 0.0 for r in retraces)
    plain = [st.duration_s for st in s.steps if not st.tracing and st.duration_s is not None]
    again = [st.duration_s for st in traced[1:] if st.duration_s is not None]
    kinds: dict[str, dict[str, Any]] = {}
    for r in retraces:
        for c in r.get("changed") or []:
            kinds.setdefault(f"{c['kind']}:{c['arg']}", {**c, "times": 0})["times"] += 1
        if r.get("new_object"):
            kinds.setdefault("new_object", {"kind": "new_object", "arg": None,
                                            "created_at": r.get("created_at"), "times": 0}
                             )["times"] += 1
    name = s.label.removeprefix("tf.function ")
    warned = sum(1 for log in obs.tf_logs if (m := WARNING.search(log.message))
                 and m["name"].rsplit(".", 1)[-1] == name.rsplit(".", 1)[-1])
    return {"function": s.label, "calls": calls, "traces": len(traced),
            "retraces": len(retraces), "trace_s": trace_total, "calls_s": call_total,
            "trace_share": trace_total / call_total if call_total > 0 else None,
            "retraced_call_s_median": statistics.median(again) if again else None,
            "trace_s_median": statistics.median([r.get("trace_s") or 0.0 for r in retraces]),
            "plain_call_s_median": statistics.median(plain) if plain else None,
            "changed": sorted(kinds.values(), key=lambda k: -k["times"]),
            "called_at": retraces[-1].get("called_at"), "def": {
                "file": s.facts.get("file"), "line": s.facts.get("line")},
            "tensorflow_warnings": warned}


def _fix(c: dict[str, Any], f: dict[str, Any]) -> str:
    name = f["function"].removeprefix("tf.function ")
    call, defined = where(f["called_at"]), where(f["def"])
    if c["kind"] == "new_object":
        return (f"define the tf.function once, outside the loop: {where(c['created_at'])}"
                f"{_code(c['created_at'])} makes a new tf.function object of {name} each "
                "time, and a new object has no trace to reuse")
    if c["kind"] == "python":
        return (f"pass {c['arg']} as a tensor at {call} ({name}({c['arg']}=tf.constant(...))): "
                "a Python value is part of the trace's key, a tensor's value is not")
    if c["kind"] == "shape":
        return (f"let {name} ({defined}) take the shapes it is given: "
                "@tf.function(reduce_retracing=True), or an input_signature with None in the "
                f"dimension of {c['arg']} that changes (tf.TensorSpec(shape=[None, ...])); or "
                "pad the inputs to a few shapes")
    if c["kind"] == "dtype":
        return f"cast {c['arg']} to one dtype before the call at {call}"
    return (f"pass tensors at {call}: {c['arg']} is a Python object, keyed by its "
            "identity, and a new one each call traces again")


def _line(at: dict[str, Any] | None) -> str | None:
    """``file:line`` of a recorded frame (None: not known)."""
    text = where(at)
    return None if text == "?" else text


def _fix_action(c: dict[str, Any], f: dict[str, Any]) -> Action:
    """_fix's change in words, at the line it names."""
    name = f["function"].removeprefix("tf.function ")
    if c["kind"] == "new_object":
        return Action(f"define the tf.function {name} once, outside the loop",
                      _line(c["created_at"]))
    if c["kind"] == "python":
        return Action(f"pass {c['arg']} as a tensor (tf.constant)", _line(f["called_at"]))
    if c["kind"] == "shape":
        return Action(f"decorate {name} with @tf.function(reduce_retracing=True), or give it "
                      "an input_signature with None in the changing dimension",
                      _line(f["def"]))
    if c["kind"] == "dtype":
        return Action(f"cast {c['arg']} to one dtype before the call", _line(f["called_at"]))
    return Action(f"pass tensors, not a Python object, as {c['arg']}", _line(f["called_at"]))


def _retrace_text(f: dict[str, Any]) -> str:
    text = (f"{f['function']} was traced {counted(f['traces'], 'time')} over "
            f"{counted(f['calls'], 'call')} "
            f"({f['retraces']} retraces)")
    if f["trace_share"] is not None:
        text += (f": building its graphs took {ms(f['trace_s'])} of its calls' "
                 f"{ms(f['calls_s'])} ({pct(f['trace_share'])}); a retrace "
                 f"{ms(f['trace_s_median'])} of its call's "
                 f"{ms(f['retraced_call_s_median'] or 0.0)} (median)")
    if f["plain_call_s_median"] is not None:
        text += f", a call that traced nothing {ms(f['plain_call_s_median'])}"
    parts = []
    for c in f["changed"][:3]:
        if c["kind"] == "new_object":
            parts.append(f"a new tf.function object each time ({c['times']}x, made at "
                         f"{where(c['created_at'])})")
        else:
            kind = {"python": "a Python value", "shape": "a tensor's shape",
                    "dtype": "a tensor's dtype"}.get(c["kind"], "a Python object")
            parts.append(f"{c['arg']}: {kind} ({c['was']} -> {c['now']} the first time; "
                         f"{c['times']} retraces)")
    if parts:
        text += "; what changed: " + "; ".join(parts)
    if f["tensorflow_warnings"]:
        text += (f"; TensorFlow's own retracing warning named it {f['tensorflow_warnings']} "
                 "time(s)")
    return text


def retracing_cause(f: dict[str, Any] | None) -> Cause | None:
    if f is None or f["retraces"] < RETRACES_WARN or (f["trace_share"] or 0.0) < TRACE_SHARE:
        return None
    shapes = [c for c in f["changed"] if c["kind"] == "shape"]
    shown = [c for c in f["changed"][:3] if c["kind"] != "shape"] + (
        [{**shapes[0], "arg": ", ".join(c["arg"] for c in shapes)}] if shapes else [])
    fixes = list(dict.fromkeys(_fix(c, f) for c in shown)) or [
        f"give {f['function']} an input_signature, or reduce_retracing=True"]
    actions = list(dict.fromkeys(_fix_action(c, f) for c in shown)) or [
        Action(f"give {f['function']} an input_signature, or reduce_retracing=True",
               _line(f["def"]))]
    return Cause("retracing", f["trace_share"] or 0.0, f"retracing: {_retrace_text(f)}",
                 "; ".join(fixes), {"retracing": f, "predicted": _retrace_predicted(f)},
                 tuple(actions))


def _predicted(cause: str, fix: str, period: float | None, step: float | None, model: str,
               inputs: dict[str, Any]) -> dict[str, Any]:
    if not period or step is None or step <= 0:
        return {"cause": cause, "step_s": None, "why": "the call's time without it was not "
                "measured"}
    return {"cause": cause, "fix": fix, "step_s": step, "speedup": period / step,
            "model": model, "inputs": {"period_s": period, **inputs}}


def _retrace_predicted(f: dict[str, Any]) -> dict[str, Any]:
    """A call that traces nothing: measured where the function had such calls, else the
    retraced call less its measured tracing time (the graph's first run's own setup,
    Grappler's, stays in: not measured apart)."""
    period = f["retraced_call_s_median"]
    if f["plain_call_s_median"] is not None:
        return _predicted("retracing", "no retrace", period, f["plain_call_s_median"],
                          "the median call that traced nothing (measured)",
                          {"plain_call_s": f["plain_call_s_median"]})
    return _predicted("retracing", "no retrace", period,
                      None if period is None else period - f["trace_s_median"],
                      "retraced call - its tracing time (both measured)",
                      {"trace_s": f["trace_s_median"]})


def retracing(obs: ProcessObservation, proc: str = "") -> Finding:
    found = [f for s in obs.series if (f := retrace_facts(s, obs)) is not None]
    check = f"run.retracing{proc}"
    functions = [s.label for s in obs.series if s.kind == "function"]
    if not functions:
        return Finding(check, "skip", "no tf.function of the program ran", {"functions": []},
                       title="no tf.function of the program ran")
    causes = [c for f in found if (c := retracing_cause(f)) is not None]
    evidence = {"functions": found, "thresholds": {"retraces": RETRACES_WARN,
                                                   "trace_share": TRACE_SHARE}}
    if causes:
        top = max(found, key=lambda f: f["retraces"])
        return Finding(check, "warn", "; ".join(c.text.removeprefix("retracing: ")
                                                 for c in causes), evidence,
                       actions=_cause_actions(causes),
                       advice="; ".join(c.advice for c in causes), title=title(
                           f"retracing: {top['function']} traced {top['traces']} times in "
                           f"{counted(top['calls'], 'call')}, {share(top['trace_share'])} of "
                           f"its time",
                           f"retracing: a tf.function traced {top['traces']} times in "
                           f"{counted(top['calls'], 'call')}",
                           "retracing: a tf.function traces again"))
    text = "; ".join(_retrace_text(f) for f in found) if found else \
        f"{', '.join(functions)}: traced once each (no retrace)"
    retraced = sum(1 for f in found if f["retraces"])
    return Finding(check, "ok", text, evidence, title=(
        f"{len(functions)} tf.function(s) traced once each" if not retraced else
        f"{retraced} tf.function(s) retraced, under the warning's threshold"))


# ------------------------------------------------------------------------ eager loops
def eager_facts(obs: ProcessObservation, s: StepSeries, warmup: int) -> dict[str, Any] | None:
    if s.kind != "eager" or len(s.steps) < 3:
        return None
    timing = loop_timing(obs, s, min(warmup, len(s.steps) // 3))
    return {"loop": s.label, "steps": sum(st.count for st in s.steps),
            "step_s_median": timing["step_s_median"] if timing else None,
            "at": {k: s.facts.get(k) for k in ("file", "line", "code")},
            "def_line": s.facts.get("def_line"), "step": s.label.removeprefix("eager step ")}


def eager_fix(f: dict[str, Any]) -> str:
    at = f["at"]
    if f["def_line"]:
        return (f"wrap the step in tf.function: decorate {f['step']} "
                f"({where({'file': at['file'], 'line': f['def_line']})}) with @tf.function "
                "(its tape.gradient at "
                f"{where(at)}); TensorFlow then runs the step's ops as one graph instead of "
                "dispatching each from Python")
    return (f"wrap the step in tf.function: move the loop body's step (its tape.gradient at "
            f"{where(at)}{_code(at)}) into a function decorated with @tf.function and call "
            "it each step; TensorFlow then runs its ops as one graph instead of dispatching "
            "each from Python")


def eager_loop(obs: ProcessObservation, warmup: int, proc: str = "") -> Finding:
    found = [f for s in obs.series if (f := eager_facts(obs, s, warmup)) is not None]
    check = f"run.eager-loop{proc}"
    if not found:
        return Finding(check, "ok", "no eager training loop (every gradient the program "
                       "computed was inside a tf.function or Keras)", {"loops": []},
                       title="no eager training loop")
    parts = [f"{f['loop']} ({where(f['at'])}) ran {counted(f['steps'], 'step')} eagerly, "
             + (f"median {ms(f['step_s_median'])} per step (start to start)"
                if f["step_s_median"] else "too few to time")
             + ": every op is dispatched from Python, one at a time" for f in found]
    return Finding(check, "warn", "; ".join(parts) + " (run.bottleneck splits a profiled "
                   "step into op time and dispatch)", {"loops": found},
                   advice="; ".join(eager_fix(f) for f in found), title=_eager_title(found[0]),
                   actions=tuple(Action("wrap the step in tf.function (@tf.function)",
                                        eager_where(f)) for f in found))


def _eager_title(f: dict[str, Any]) -> str:
    step = (f", {duration(f['step_s_median'])} a step" if f["step_s_median"] else "")
    return title(f"eager loop at {where(f['at'])}: {counted(f['steps'], 'step')} dispatched from "
                 f"Python{step}", f"an eager loop: {counted(f['steps'], 'step')} dispatched from "
                 f"Python{step}", "an eager training loop: ops dispatched from Python")


# -------------------------------------------------------------------------- callbacks
BATCH = ("on_train_batch_begin", "on_train_batch_end", "on_batch_begin", "on_batch_end")


def _fit_s(s: StepSeries) -> float | None:
    """The fit's wall time, its first step's start to its last step's end."""
    starts = [(st.start_unix_s, st.duration_s) for st in s.steps if st.start_unix_s is not None]
    if not starts or starts[-1][1] is None:
        return None
    return starts[-1][0] + starts[-1][1] - starts[0][0]


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
    fit_s = _fit_s(s)
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
                                     "predicted": _predicted(
                      "callbacks", f"{c['class']}'s batch work moved off the batches",
                      c["step_s_median"], (c["step_s_median"] or 0.0) - c["batch_s_per_step"],
                      "step period - the callback's batch hooks' time per step (both "
                      "measured over the whole run)", {"callback_s": c["batch_s_per_step"]})},
                  (Action(f"do {c['class']}'s per-batch work every N batches or in "
                          "on_epoch_end", _line(c)),))
            for c in facts if c["share"] is not None and c["share"] >= CALLBACK_SHARE]


def _cause_actions(causes: Sequence[Cause]) -> tuple[Action, ...]:
    """Each cause's actions, its own prediction on its first."""
    out: list[Action] = []
    for c in causes:
        mine = [a for a in c.actions if a not in out]
        if mine:
            mine[0] = replace(mine[0], predicted=as_prediction(c.evidence.get("predicted")))
        out += mine
    return tuple(out)


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
                       actions=_cause_actions(named),
                       advice="; ".join(c.advice for c in named),
                       title=_callback_title(named[0].evidence["callback"]))
    return Finding(check, "ok", "; ".join(_callback_text(c) for c in found), evidence,
                   title=title(f"callbacks: {len(found)} of the program's, none takes "
                               f"{share(CALLBACK_SHARE)} of a step",
                               "callbacks: none slows the steps"))


def _callback_title(c: dict[str, Any]) -> str:
    cost = f"{share(c['share'])} of a {duration(c['step_s_median'])} step"
    return title(f"callback {c['class']} takes {cost}", f"a Keras callback takes {cost}")


# ------------------------------------------------------------------ for run.bottleneck
PY_INPUT_SHARE = 0.20  # of the step period taking a batch from a Python data class
# (xprof's input-bound threshold: gpudiag.verdicts.step_causes.INPUT_BOUND)


def _py_input_fix(p: dict[str, Any]) -> str:
    """The fix that fits the data class: TensorFlow ops instead of Python per batch first
    (measured in tests/e2e/test_input_advice_e2e.py: the tf.data twin 1.6-1.9x faster); more
    thread workers are no fix for Python per example (the GIL runs them one at a time:
    4 measured no faster than 1)."""
    tf_data = ("tf.data ops instead of Python per batch: tf.data.Dataset.from_tensor_slices"
               "((x, y)).batch(n).map(a function of the whole batch in TensorFlow ops, "
               "num_parallel_calls=tf.data.AUTOTUNE).prefetch(tf.data.AUTOTUNE), passed to "
               "fit as it is")
    if p["source"] == "generator":
        return (f"{tf_data}; a Python generator runs on one thread holding the GIL, so "
                "only leaving Python per batch takes it off the step")
    workers = p.get("workers") or 1
    if workers > 1 and not p.get("use_multiprocessing"):
        return (f"{tf_data}; its {workers} workers are threads, and Python per example "
                "holds the GIL, so they run one at a time: time workers=1, and "
                "use_multiprocessing=True where the cores are free (processes compete with "
                "the step's own threads for the cores)")
    if workers > 1:
        return (f"{tf_data}; or vectorise __getitem__ (NumPy over the whole batch, not a "
                f"loop over its examples): its {workers} worker processes do not keep up")
    return (f"{tf_data}; or vectorise __getitem__ (NumPy over the whole batch, not a loop "
            "over its examples)")


def py_input_facts(obs: ProcessObservation, s: StepSeries, warmup: int
                   ) -> list[dict[str, Any]]:
    """The Python data classes a Keras fit took its batches from (gpudiag.inprogram.pydata),
    each with its time a batch against the fit's step period, both over the whole run."""
    timing = loop_timing(obs, s, warmup)
    period = timing["step_s_median"] if timing else None
    fit_s = _fit_s(s)
    out = []
    for p in s.facts.get("py_input") or []:
        if not p.get("batches") or p.get("median_s") is None:
            continue
        # thread workers: the CPU their __getitem__ costs a batch (the GIL runs that
        # Python one thread at a time, beside the step's); else the wait where taken
        workers = p.get("cpu_where") == "workers" and p.get("cpu_median_s") is not None
        batch = p["cpu_median_s"] if workers else p["median_s"]
        out.append({**p, "period_s": period, "fit_s": fit_s, "batch_s": batch,
                    "measure": "workers_cpu" if workers else "taken",
                    "share": batch / period if period else None,
                    "run_share": p["total_s"] / fit_s if fit_s else None})
    return out


def _py_input_text(p: dict[str, Any]) -> str:
    kind = "keras.utils.PyDataset" if p["source"] == "PyDataset" else "Python generator"
    tail = (f": {pct(p['share'])} of the {ms(p['period_s'])} step (median, the whole run; "
            "the profiled window's input share counts only the step's own wait in the "
            "iterator)")
    if p.get("measure") == "workers_cpu":
        return (f"fit takes its batches from the {kind} {p['class']}, whose "
                f"{p.get('workers')} thread workers spend {ms(p['batch_s'])} of CPU in "
                f"__getitem__ a batch (median of {counted(p['batches'], 'batch')}; taking one from "
                f"their queue {ms(p['median_s'])}), Python that holds the GIL beside the "
                f"step{tail}")
    what = ("its __getitem__" if (p.get("workers") or 1) <= 1 and
            not p.get("use_multiprocessing") else
            f"the wait on its {p.get('workers')} worker"
            f"{' processes' if p.get('use_multiprocessing') else 's'}' queue")
    run = (f", {p['total_s']:.2f} s of the fit's {p['fit_s']:.2f} s"
           if p.get("fit_s") else "")
    return (f"fit takes each batch from the {kind} {p['class']} ({what}, on tf.data's "
            f"thread) in {ms(p['batch_s'])} (median of {p['batches']} batches{run}){tail}")


def py_input_causes(facts: Sequence[dict[str, Any]]) -> list[Cause]:
    out = []
    for p in facts:
        if p["share"] is None or p["share"] < PY_INPUT_SHARE:
            continue
        out.append(Cause(
            "input-bound", p["share"], f"input-bound: {_py_input_text(p)}", _py_input_fix(p),
            {"py_input": p, "window_share": 0.0, "predicted": {
                "cause": "input-bound", "step_s": None, "why": "the batch is made on "
                "tf.data's thread beside the step: how much of its time the step waits "
                "for is not measured (time the tf.data twin)"}}))
    return out


def loop_causes(obs: ProcessObservation, label: str | None, warmup: int) -> list[Cause]:
    """The step-series causes of one loop (the profiled one), for run.bottleneck."""
    s = next((x for x in obs.series if x.label == label), None)
    if s is None:
        return []
    found = [retracing_cause(retrace_facts(s, obs)), *py_input_causes(
        py_input_facts(obs, s, warmup))]
    return [c for c in found if c is not None] + callback_causes(callback_facts(obs, s,
                                                                                warmup))
