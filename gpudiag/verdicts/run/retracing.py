"""run.retracing: a tf.function traced again and again, measured over the whole run by
the hooks (gpudiag.inprogram.functions / tracing): how many traces over how many calls,
their time, what changed between traces (a Python value, a tensor's shape or dtype, a new
function object), the program's line and the fix there. :func:`retracing_cause` gives
the same as a cause of the profiled loop's step for run.bottleneck.

Threshold: a function traced at least RETRACES_WARN times after its first trace, with its
tracing at least TRACE_SHARE of its calls' time, retraces. Pure functions of
gpudiag.records.run.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from gpudiag.layout.units import counted, share
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.host_common import cause_actions, code, line, predicted, where
from gpudiag.verdicts.step_causes import Cause, ms

RETRACES_WARN = 2  # retraces (traces after the first) before retracing is a cause
TRACE_SHARE = 0.10  # of the function's calls' time spent tracing
WARNING = re.compile(r"calls to <function (?P<name>[\w.<>]+) at 0x[0-9a-f]+> triggered "
                     r"tf.function retracing")


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
                f"{code(c['created_at'])} makes a new tf.function object of {name} each "
                "time, and a new object has no trace to reuse")
    if c["kind"] == "python":
        args = c["arg"].split(", ")
        if len(args) == 1:
            return (f"pass {c['arg']} as a tensor at {call} ({name}({c['arg']}="
                    "tf.constant(...))), or hold it in a tf.Variable the loop assigns: a "
                    "Python value is part of the trace's key, a tensor's value is not")
        return (f"pass {c['arg']} as tensors at {call} ({name}("
                + ", ".join(f"{a}=tf.constant({a})" for a in args) + ")), all of them: "
                "a Python value is part of the trace's key, a tensor's value is not, and "
                "one left a Python value still traces again whenever it changes")
    if c["kind"] == "shape":
        return (f"let {name} ({defined}) take the shapes it is given: "
                "@tf.function(reduce_retracing=True), or an input_signature with None in the "
                f"dimension of {c['arg']} that changes (tf.TensorSpec(shape=[None, ...])); or "
                "pad the inputs to a few shapes")
    if c["kind"] == "dtype":
        return f"cast {c['arg']} to one dtype before the call at {call}"
    return (f"pass tensors at {call}: {c['arg']} is a Python object, keyed by its "
            "identity, and a new one each call traces again")


def _fix_action(c: dict[str, Any], f: dict[str, Any]) -> Action:
    """_fix's change in words, at the line it names."""
    name = f["function"].removeprefix("tf.function ")
    if c["kind"] == "new_object":
        return Action(f"define the tf.function {name} once, outside the loop",
                      line(c["created_at"]))
    if c["kind"] == "python":
        many = ", " in c["arg"]
        return Action(f"pass {c['arg']} as {'tensors, all of them' if many else 'a tensor'} "
                      "(tf.constant)", line(f["called_at"]))
    if c["kind"] == "shape":
        return Action(f"decorate {name} with @tf.function(reduce_retracing=True), or give it "
                      "an input_signature with None in the changing dimension",
                      line(f["def"]))
    if c["kind"] == "dtype":
        return Action(f"cast {c['arg']} to one dtype before the call", line(f["called_at"]))
    return Action(f"pass tensors, not a Python object, as {c['arg']}", line(f["called_at"]))


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
    shown = [c for c in f["changed"][:3] if c["kind"] not in ("shape", "python")]
    for kind in ("shape", "python"):  # every argument of a kind: fixed together or not at all
        alike = [c for c in f["changed"] if c["kind"] == kind]
        if alike:
            shown.insert(0, {**alike[0], "arg": ", ".join(c["arg"] for c in alike)})
    fixes = list(dict.fromkeys(_fix(c, f) for c in shown)) or [
        f"give {f['function']} an input_signature, or reduce_retracing=True"]
    actions = list(dict.fromkeys(_fix_action(c, f) for c in shown)) or [
        Action(f"give {f['function']} an input_signature, or reduce_retracing=True",
               line(f["def"]))]
    return Cause("retracing", f["trace_share"] or 0.0, f"retracing: {_retrace_text(f)}",
                 "; ".join(fixes), {"retracing": f, "predicted": _retrace_predicted(f)},
                 tuple(actions))


def _retrace_predicted(f: dict[str, Any]) -> dict[str, Any]:
    """A call that traces nothing: measured where the function had such calls, else the
    retraced call less its measured tracing time: at most that, the new graph's first run
    (its optimisation by Grappler, its setup) staying in, not measured apart."""
    period = f["retraced_call_s_median"]
    if f["plain_call_s_median"] is not None:
        return predicted("retracing", "no retrace", period, f["plain_call_s_median"],
                         "the median call that traced nothing (measured)",
                         {"plain_call_s": f["plain_call_s_median"]})
    return predicted("retracing", "no retrace", period,
                     None if period is None else period - f["trace_s_median"],
                     "at most: a retraced call - its tracing time (both measured; the new "
                     "graph's first run, optimised and set up, stays in)",
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
                       actions=cause_actions(causes),
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
