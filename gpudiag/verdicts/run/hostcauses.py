"""The host-side causes of a slow step that the step series shows, with no trace needed:
an eager training loop (run.eager-loop) and a Keras fit taking its batches from a Python
data class; retracing (gpudiag.verdicts.run.retracing), the program's own Keras callbacks
(callbacks) and tensors read back to Python every step (hostsync) are families of their
own. Each is measured over the whole run by the hooks (gpudiag.inprogram.eagersteps,
pydata, ...); each finding names the program's line and the fix there. :func:`loop_causes`
gives them all as causes of the profiled loop's step for run.bottleneck
(gpudiag.verdicts.step_causes.Cause). Pure functions of gpudiag.records.run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import counted, duration
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.callbacks import callback_causes, callback_facts, callbacks
from gpudiag.verdicts.run.host_common import code, fit_wall_s, where
from gpudiag.verdicts.run.hostsync import host_sync
from gpudiag.verdicts.run.retracing import retrace_facts, retracing, retracing_cause
from gpudiag.verdicts.run.throughput import loop_timing
from gpudiag.verdicts.step_causes import WRAP, Cause, eager_where, ms


# ------------------------------------------------------------------------ eager loops
def eager_facts(obs: ProcessObservation, s: StepSeries, warmup: int) -> dict[str, Any] | None:
    if s.kind != "eager" or len(s.steps) < 3:
        return None
    timing = loop_timing(obs, s, min(warmup, len(s.steps) // 3))
    eagerly = left_on(obs).get(RUN_EAGERLY)  # its tf.functions ran eagerly: that is the fix
    return {"loop": s.label, "steps": sum(st.count for st in s.steps),
            "step_s_median": timing["step_s_median"] if timing else None,
            "at": {k: s.facts.get(k) for k in ("file", "line", "code")},
            "def_line": s.facts.get("def_line"), "step": s.label.removeprefix("eager step "),
            "run_eagerly_at": eagerly.where if eagerly else None,
            "action": f"remove {_call(eagerly)}" if eagerly else WRAP}


def eager_fix(f: dict[str, Any]) -> str:
    at = f["at"]
    if f.get("run_eagerly_at"):
        return (f"{f['action']} at {f['run_eagerly_at']}: while it is on, "
                f"{_DEBUG_COSTS[RUN_EAGERLY]}; the step at {where(at)} is a tf.function "
                "already")
    if f["def_line"]:
        return (f"wrap the step in tf.function: decorate {f['step']} "
                f"({where({'file': at['file'], 'line': f['def_line']})}) with @tf.function "
                "(its tape.gradient at "
                f"{where(at)}); TensorFlow then runs the step's ops as one graph instead of "
                "dispatching each from Python")
    return (f"wrap the step in tf.function: move the loop body's step (its tape.gradient at "
            f"{where(at)}{code(at)}) into a function decorated with @tf.function and call "
            "it each step; TensorFlow then runs its ops as one graph instead of dispatching "
            "each from Python")


def eager_loop(obs: ProcessObservation, warmup: int, proc: str = "") -> Finding:
    found = [f for s in obs.series if (f := eager_facts(obs, s, warmup)) is not None]
    check = f"run.eager-loop{proc}"
    eagerly = left_on(obs).get(RUN_EAGERLY)
    loops = [s.label for s in obs.series if s.steps]
    if not found and eagerly is not None and loops:  # Keras fit, the program's tf.functions
        return Finding(check, "warn", f"{', '.join(loops)} ran eagerly: {_call(eagerly)} at "
                       f"{eagerly.where} was left on: {_DEBUG_COSTS[RUN_EAGERLY]}",
                       {"loops": [], "run_eagerly_at": eagerly.where},
                       advice=f"remove {_call(eagerly)} at {eagerly.where}",
                       title=title(f"{loops[0]} ran eagerly: run_functions_eagerly at "
                                   f"{eagerly.where}", "the training loop ran eagerly: "
                                   "run_functions_eagerly(True) left on"),
                       actions=(Action(f"remove {_call(eagerly)}", eagerly.where),))
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
                   actions=tuple(Action(f["action"], eager_where(f))
                                 for f in found))


def _eager_title(f: dict[str, Any]) -> str:
    step = (f", {duration(f['step_s_median'])} a step" if f["step_s_median"] else "")
    steps = counted(f["steps"], "step")
    switch = f"run_functions_eagerly at {f['run_eagerly_at']}: {steps} dispatched from Python"
    return title(*([f"{switch}{step}", switch] if f.get("run_eagerly_at") else []),
                 f"eager loop at {where(f['at'])}: {steps} dispatched from Python{step}",
                 f"an eager loop: {steps} dispatched from Python{step}",
                 "an eager training loop: ops dispatched from Python")


# ------------------------------------------------------------------ debugging switches
RUN_EAGERLY = "run_functions_eagerly"
# what each switch costs while it is on, by the name of its function family
_DEBUG_COSTS = {
    RUN_EAGERLY: "every tf.function (Keras fit's train step too) runs its Python eagerly, "
    "each op dispatched from Python one at a time: a graph's speed is lost",
    "debug_mode": "tf.data runs every transformation synchronously and sequentially "
    "(num_parallel_calls and prefetch's overlap have no effect), and its map functions "
    "eagerly in Python through tf.py_function",
    "check_numerics": "every floating-point op's output is checked for NaN and Inf: an op "
    "callback adds a check to each op, eager ones and those of tf.function graphs",
}
_EFFECT = {RUN_EAGERLY: "every tf.function ran eagerly",
           "debug_mode": "tf.data ran sequentially, its maps in Python",
           "check_numerics": "every op was checked for NaN and Inf"}


def _family(api: str) -> str:
    name = api.rsplit(".", 1)[-1]
    return RUN_EAGERLY if name.endswith(RUN_EAGERLY) else name.split("_", 1)[-1]


def _call(d: Any) -> str:
    """The call as the program wrote it: ``tf.config.run_functions_eagerly(True)``."""
    return f"{d.api}({'True' if d.api.endswith('eagerly') else ''})"


def left_on(obs: ProcessObservation) -> dict[str, Any]:
    """The debugging switches the program left on (gpudiag.layout.events.DebugMode), by
    family: the latest call of each family that turned it on."""
    latest = {_family(d.api): d for d in obs.debug_modes}
    return {fam: d for fam, d in latest.items() if d.enabled}


def debug_modes(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """run.debug-mode: a debugging switch left on makes every step slower (absent where the
    program called none)."""
    if not obs.debug_modes:
        return None
    check, on = f"run.debug-mode{proc}", left_on(obs)
    calls = [{"api": d.api, "enabled": d.enabled, "where": d.where} for d in obs.debug_modes]
    if not on:
        return Finding(check, "ok", "every debugging switch the program turned on it turned "
                       "off again: " + ", ".join(f"{c['api']} at {c['where']}" for c in calls),
                       {"calls": calls, "left_on": []}, title="no debugging switch left on")
    said = [f"{_call(d)} at {d.where}: {_DEBUG_COSTS[fam]}" for fam, d in on.items()]
    fam, first = next(iter(on.items()))
    short = _call(first).rsplit(".", 1)[-1]
    return Finding(check, "warn", "left on: " + "; ".join(said),
                   {"calls": calls, "left_on": [d.api for d in on.values()]},
                   advice="remove the call, or keep it behind a flag of your own for "
                   "debugging: " + ", ".join(f"{d.api} at {d.where}" for d in on.values()),
                   title=title(f"{_call(first)} left on at {first.where}: {_EFFECT[fam]}",
                               f"{short} at {first.where}: {_EFFECT[fam]}",
                               f"{short} left on at {first.where}",
                               f"a debugging switch left on: {_EFFECT[fam]}"),
                   actions=tuple(Action(f"remove {_call(d)}", d.where if d.caller else None)
                                 for d in on.values()))


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
    fit_s = fit_wall_s(s)
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


def findings(obs: ProcessObservation, warmup: int, proc: str = "") -> list[Finding]:
    """The host-side findings of one process: run.retracing, run.eager-loop,
    run.callbacks, run.host-sync (absent where no line reads tensors every step),
    run.debug-mode (absent where the program switched no debugging mode)."""
    optional = (host_sync(obs, warmup, proc), debug_modes(obs, proc))
    return [retracing(obs, proc), eager_loop(obs, warmup, proc),
            callbacks(obs, warmup, proc), *[f for f in optional if f is not None]]
