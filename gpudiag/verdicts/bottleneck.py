"""Why is it slow: the dominant cause of a step's time, with its numbers, and the fix at the
program's own line where the evidence has it.

Pure: gpudiag.readers.steprecords.Breakdown (the profiled window's trace), and what is
known of the program (gpudiag.verdicts.step_causes.ProgramFacts: its tf.data calls, the
step loop, the replicas, NVML's samples) in; a Finding out. The causes, each with its
text and its fix written together, and their thresholds are in
gpudiag.verdicts.step_causes (and its families' input_causes and call_causes); the devices
judged and their mean step in step_parts. This module judges the causes, predicts the
first one's fix (whatif), and says what no cause says: a trace whose GPUs recorded no
kernel (no bound claimed), and, when no part dominates, which parts are close.
On a GPU with GPM (Hopper and later), a GPU NVML calls busy whose SMs mostly idle
(gpudiag.verdicts.gpu_fill) is a cause too: a few small kernels.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from gpudiag.layout.units import counted, duration
from gpudiag.layout.units import share as pct
from gpudiag.readers.steprecords import Breakdown, DeviceBreakdown, StepParts
from gpudiag.report import Action, Finding
from gpudiag.verdicts import (
    allreduce,
    call_causes,
    gpu_fill,
    input_causes,
    stats,
    step_causes,
    whatif,
)
from gpudiag.verdicts.call_causes import loop_line, more_steps
from gpudiag.verdicts.common import title
from gpudiag.verdicts.input_causes import floor_note, input_share, window_missed
from gpudiag.verdicts.pipeline import fixes as pipeline_fix_list
from gpudiag.verdicts.pipeline import pipeline_fixes, python_ops, random_ops
from gpudiag.verdicts.prediction import with_interval
from gpudiag.verdicts.step_causes import (
    INPUT_MODERATE,
    OVERHEAD_BOUND,
    THRESHOLDS,
    WRAP,
    Cause,
    Judged,
    ProgramFacts,
    advice,
    eager_where,
    ms,
    order,
    small_kernels,
)
from gpudiag.verdicts.step_parts import (
    PARTS,
    mean_parts,
    parts_seconds,
    parts_text,
    step_means,
    working,
)
from gpudiag.verdicts.whatif_input import cpu_use_parts

__all__ = ["ProgramFacts", "bottleneck", "eager", "pipeline_fixes"]

CLOSE = 0.10  # with no cause, the parts at or above this share are named as the close ones


#: A slow step's causes, each judged by its family's module (gpudiag.verdicts.step_causes
#: the device's, input_causes the input's, call_causes the step call's).
CAUSES: tuple[Callable[[Judged], Cause | None], ...] = (
    input_causes.input_bound, step_causes.copy_bound, call_causes.host_bound,
    step_causes.communication_bound, call_causes.launch_bound, step_causes.gpu_bound,
    step_causes.straggler, step_causes.idle_gpus)


def causes(j: Judged) -> list[Cause]:
    """Every cause above its threshold (or near it), in ``order``: clear ones first,
    overhead-bound after the others (what is left when nothing else explains the step).
    The step series' causes (retracing, callbacks: time inside the step with no op
    running) take their share off overhead-bound's (a callback: its typical batch's share,
    ``window_share``), which stays only when what is left is still over its threshold."""
    found = [c for rule in CAUSES if (c := rule(j)) is not None]
    if any(c.evidence.get("jit_compile") for c in found):
        # the XLA step's per-call cause holds the Python between the calls: one fix
        found = [c for c in found if c.name != "host-bound"]
    host = list(j.facts.host_causes)
    if any(c.name == "input-bound" for c in host):  # the whole run's measure of the input
        found = [c for c in found if c.name != "input-bound"]
    if host:
        # a cause's share in a typical step (what the window holds: a callback saving
        # every N batches costs the whole run much, a window of a few steps little)
        left = sum(c.share for c in found if c.name == "overhead-bound") - \
            sum(c.share if c.evidence.get("window_share") is None
                else c.evidence["window_share"] for c in host)
        found = [c for c in found if c.name != "overhead-bound" or left >= OVERHEAD_BOUND]
    return sorted([*found, *host], key=order)


def _evidence(b: Breakdown, j: Judged, found: list[Cause], facts: ProgramFacts,
              per_device: dict[str, str]) -> dict[str, Any]:
    m = j.m
    return {
        "trace": b.path, "steps_from": b.steps_from, "steps": len(b.step_names),
        "step_s": m.period_s, "shares": {k: m.share(getattr(m, f"{k}_s")) for k in (
            "compute", "copy", "input", "communication", "host", "host_between_calls",
            "idle")} | {"launch": m.share(m.launch_s)},
        "devices": per_device, "parts_s": {d.device: parts_seconds(mean) for d in b.devices
                                           if (mean := d.mean())},  # every device
        "kernels": {d.device: None if d.kernel_stats is None else {
            "per_step": d.kernel_stats.kernels_per_step,
            "median_s": d.kernel_stats.median_kernel_s, "mean_s": d.kernel_stats.mean_kernel_s,
            "mean_gap_s": d.kernel_stats.mean_gap_s, "half_share": d.kernel_stats.half_share,
            "tensor_core_share": d.kernel_stats.tensor_core_share}
            for d in b.devices if d.source == "device-plane"},
        "gpus_without_kernels": b.gpus_without_kernels, "notes": b.notes,
        "host_ops_share": b.host_ops_share, "updates_per_call": b.updates_per_call,
        "replica_skew_s": b.replica_skew_s, "causes": [c.name for c in found],
        "cause_evidence": {c.name: c.evidence for c in found if c.evidence},
        "xprof": None if b.xprof is None else {
            "conclusion": b.xprof.conclusion,
            "input_ops": [(o.name, o.self_ms) for o in b.xprof.input_ops]},
        "xprof_error": b.xprof_error, "thresholds": THRESHOLDS,
        "cpu_use": facts.cpu_use,  # the cores the program kept busy after the window
        "dataset_calls": [{"method": c.method, "args": c.args, "where": c.where,
                           "random_ops": random_ops(c), "python_ops": python_ops(c)}
                          for c in facts.calls if c.caller and c.caller.get("direct")]}


def _predicted(found: list[Cause], m: StepParts, evidence: dict[str, Any],
               facts: ProgramFacts, rows: Sequence[DeviceBreakdown] = ()) -> dict[str, Any]:
    """evidence.predicted: whatif's model of the first cause; the step series' causes
    carry their own (measured over the whole run); an eager loop's is whatif's eager
    model (no number where it measures none: it says why)."""
    first = found[0] if found else None
    if first is not None and "predicted" in first.evidence:
        return dict(first.evidence["predicted"])
    if first is not None and first.name == "eager":
        return {**whatif.host_bound(parts_seconds(m), eager=True), "cause": "eager"}
    in_place = None  # more steps a call already in place: no steps-a-call prediction
    if first is not None and first.name == "overhead-bound":
        in_place = first.evidence.get("steps_per_execution") or first.evidence.get(
            "steps_per_call")
    names = [c.name for c in found]
    steps = step_means(rows)
    missed = facts.window_input
    if missed is not None and names and names[0] == "input-bound":
        # the run's step, not the window's: the window's other work and the wait it missed
        def of_run(step_s: float) -> StepParts:
            return replace(m, period_s=step_s,
                           input_s=max(m.input_s, step_s - missed["window_other_s"]))
        ci = stats.median_ci(facts.run_periods) or (missed["run_step_s"],) * 2
        m, steps = of_run(missed["run_step_s"]), [of_run(ci[0]), of_run(ci[1])]
    pred = with_interval(whatif.predict(
        names, parts_seconds(m), evidence, epochs=facts.epochs, steps_a_call=in_place), [
        whatif.predict(names, parts_seconds(step), evidence, epochs=facts.epochs,
                       steps_a_call=in_place) for step in steps])
    if missed is not None and names and names[0] == "input-bound" and "interval_from" in pred:
        pred["interval_from"] = re.sub(
            r"the model replayed on [^;]* profiled steps",
            f"the model replayed on the 95 % CI of the run's median step "
            f"({counted(len(facts.run_periods), 'step')}; the window's other work as measured)",
            pred["interval_from"])
    if names and names[0] == "input-bound" and pred.get("step_s") is not None:
        accelerator = float(any("GPU" in d.upper() or "TPU" in d.upper()
                                for d in evidence.get("parts_s") or {}))
        more = {"accelerator": accelerator,  # as predict reads them
                **cpu_use_parts(evidence.get("cpu_use"))}
        pred["by_change"] = whatif.input_bound_by_change(
            {**parts_seconds(m), **more}, [{**parts_seconds(step), **more} for step in steps],
            evidence.get("dataset_calls") or [], int(pred["inputs"]["cores"]), facts.epochs)
    return pred


#: What each cause does to the step, in a title's words (``{s}``: its share, ``{p}``: the
#: step's duration).
_CAUSE_TITLES = {
    "input-bound": "input-bound: {s} of a {p} step waits for input",
    "copy-bound": "copy-bound: {s} of a {p} step copies between host and GPU",
    "host-bound": "host-bound: {s} of a {p} step is Python between step calls",
    "launch-bound": "launch-bound: the GPU waits {s} of a {p} step for launches",
    "gpu-bound": "GPU-bound: kernels run {s} of a {p} step",
    "communication-bound": "communication-bound: all-reduce takes {s} of a {p} step",
    "overhead-bound": "overhead-bound: {s} of a {p} step is TensorFlow's own work",
    "straggler": "straggler: a replica starts late by {s} of a {p} step",
    "idle-gpus": "idle GPUs: {s} of the GPUs ran no kernel in a {p} step",
    "small-kernels": "small kernels: the SMs idle {s} of the busy time ({p} step)",
    "retracing": "retracing: {s} of a {p} step traces tf.functions again",
    "callbacks": "callbacks: {s} of a {p} step runs the program's Keras callbacks",
    "eager": "host-bound eager loop: {s} of a {p} step dispatches ops",
}


def actions(found: Sequence[Cause], predicted: dict[str, Any] | None,
            step_s: float | None) -> tuple[Action, ...]:
    """What the causes' advice says to change, in the causes' order, each once; the one
    whose change the first cause's prediction sizes (whatif: evidence.predicted, made
    from the window's ``step_s``) carries it."""
    out: list[Action] = []
    for c in found:
        out += [a for a in c.actions if a not in out]
    sized = found[0].predicted_action if found else None
    if predicted is not None and sized is not None and sized < len(found[0].actions):
        i = out.index(found[0].actions[sized])
        out[i] = replace(out[i], predicted=whatif.as_prediction(predicted, step_s))
    return tuple(out)


def cause_title(cause: str, fraction: float, period_s: float, loop: str | None = None,
                under: float | None = None) -> str:
    """A bottleneck's title: its cause, its share of the step and the step's duration
    (``input-bound: 47 % of a 32.6 ms step waits for input``), with the loop's name
    before it where that fits. ``under``: the cause's line, when its share is under it
    and the interval reaches it (near the threshold): said "near", never the cause alone
    (a 10 % communication share is not called communication-bound at its 20 % line)."""
    text = _CAUSE_TITLES.get(cause, cause + ": {s} of a {p} step").format(
        s=pct(fraction), p=duration(period_s))
    if under is not None:
        line = f"under its {pct(under)} line"
        return title(f"{loop}: near {text}, {line}" if loop else f"near {text}, {line}",
                     f"near {text}, {line}",
                     f"near {cause} ({pct(fraction)} of a {duration(period_s)} "
                     f"step, {line})", f"near {cause} ({pct(fraction)}, {line})")
    return title(f"{loop}: {text}" if loop else text, text)


def _under(cause: Any) -> float | None:
    """The cause's threshold when its share is under it (named as near it), else None."""
    a = cause.evidence.get("against") if isinstance(cause.evidence, dict) else None
    if isinstance(a, dict) and a.get("side") == "near" and a["value"] < a["threshold"]:
        return float(a["threshold"])
    return None


def _no_kernels(b: Breakdown, rows: Sequence[DeviceBreakdown], head: str,
                check_id: str) -> Finding:
    """Every GPU judged recorded no kernel: say so, claim no bound."""
    gpus = ", ".join(d.device for d in rows)
    where = (f"the host's threads ran TensorFlow ops {pct(b.host_ops_share)} of the step, "
             "so the work ran on the CPU" if b.host_ops_share >= 0.5 else
             f"the host's threads ran TensorFlow ops {pct(b.host_ops_share)} of the step")
    return Finding(
        check_id, "warn",
        f"{head}: no GPU recorded a kernel in the profiled steps ({gpus}): {where}, or the "
        "profiler did not capture the device (CUPTI); no bound is claimed from this trace",
        {"trace": b.path, "steps_from": b.steps_from, "steps": len(b.step_names),
         "gpus_without_kernels": b.gpus_without_kernels, "host_ops_share": b.host_ops_share,
         "causes": ["no-gpu-kernels"], "notes": b.notes},
        title=title(f"no GPU kernel in the profiled steps of {gpus}",
                    "no GPU recorded a kernel in the profiled steps"),
        advice="see where the ops ran (tf.debugging.set_log_device_placement(True), or "
               "gpudiag run's placement) and whether the profiler's GPU tracer started: its "
               "log names CUPTI errors (libcupti on LD_LIBRARY_PATH, from CUDA's "
               "extras/CUPTI/lib64; on Linux, profiling permission for non-admin users: "
               "NVreg_RestrictProfilingToAdminUsers=0)")


def _calm(head: str, m: StepParts, facts: ProgramFacts, check_id: str,
          evidence: dict[str, Any], tail: str) -> Finding:
    """No cause over its threshold: moderately input-bound, or which parts are close."""
    share, source, _ = input_share(facts, m)
    floor = floor_note(facts)
    if floor is not None:
        # next()'s own per-call cost is a sizeable share and the wait beyond it is under
        # the input-bound threshold: fewer calls is the fix; prefetch hides at most the
        # rest (nothing where the cores are busy: keras-io's XLA loop on 2 cores)
        return Finding(check_id, "ok", f"{head}: not input-bound ({pct(share)} waits for "
                       f"input{source}, at most what prefetch could hide): {floor}; "
                       f"{parts_text(m)}{tail}", evidence,
                       advice=f"fewer next() calls: {more_steps(facts.loop)}",
                       title=title(f"not input-bound: next() is its own cost ({pct(share)} "
                                   f"of a {duration(m.period_s)} step), not a wait",
                                   "not input-bound: next()'s own cost, not a wait"),
                       actions=(Action(f"fewer next() calls: {more_steps(facts.loop)}",
                                       loop_line(facts)),))
    if share >= INPUT_MODERATE:
        fixes = tuple(Action(f.what, f.where) for f in pipeline_fix_list(facts.calls,
                                                                          facts.epochs))
        return Finding(check_id, "ok", f"{head}: moderately input-bound "
                       f"({pct(share)} waits for input{source}); {parts_text(m)}{tail}",
                       evidence, advice="; ".join(pipeline_fixes(facts.calls, facts.epochs)),
                       title=title(f"moderately input-bound: {pct(share)} of a "
                                   f"{duration(m.period_s)} step waits for input",
                                   "moderately input-bound"), actions=fixes)
    shares = {k: m.share(getattr(m, f"{k}_s")) for k in PARTS}
    close = [f"{k} {pct(v)}" for k, v in sorted(shares.items(), key=lambda kv: -kv[1])
             if v >= CLOSE]
    largest = max(shares, key=lambda k: shares[k])
    return Finding(check_id, "ok", f"{head}: no bottleneck stands out (no part dominates; "
                   f"the largest: {', '.join(close) or 'none'}); {parts_text(m)}{tail}",
                   evidence, title=title(
                       f"no bottleneck (largest: {largest}, {pct(shares[largest])} "
                       f"of a {duration(m.period_s)} step)",
                       f"no bottleneck stands out in a {duration(m.period_s)} step"))


def bottleneck(b: Breakdown | None, reason: str | None, facts: ProgramFacts | None = None,
               *, check_id: str = "run.bottleneck") -> Finding:
    """The dominant cause of the profiled steps' time, or ok when none stands out."""
    facts = facts or ProgramFacts()
    if b is None:
        return Finding(check_id, "skip", f"no trace of the program's steps: {reason}",
                       {"reason": reason, "predicted": whatif.nothing_measured(reason)},
                       title="no trace of the program's steps")
    rows = working(b, facts.replicas)
    m = mean_parts(rows)
    if m is None or m.period_s <= 0:
        return Finding(check_id, "skip", "the trace holds no complete step", {
            "path": b.path, "predicted": whatif.nothing_measured("no complete step")},
            title="the trace holds no complete step")
    missed = window_missed(facts, m)
    if missed is not None:  # a fit whose window did not see its steady state's input wait
        facts = replace(facts, window_input=missed)
    j = Judged(m, rows, b, facts)
    head = (f"{facts.loop + ': ' if facts.loop else ''}{ms(m.period_s)} per step over "
            f"{len(b.step_names)} profiled step(s) ({b.steps_from})")
    k = b.updates_per_call
    if k is not None and k > 1:
        head += (f"; each step call ran {k:.0f} training steps ({ms(m.period_s / k)} a "
                 "training step), its backward ops or updates repeated in a call")
    if j.gpu and not any(d.ran_kernels for d in rows):
        return _no_kernels(b, rows, head, check_id)
    note = gpu_fill.bottleneck_note(facts.nvml_gpus, j.gpu)
    found = sorted(causes(j) + small_kernels(note.small), key=order)
    reduce = allreduce.all_reduce(facts.gradient_bytes, m.communication_s, m.period_s)
    if reduce is not None:
        found = [replace(c, text=f"{c.text}; {reduce.text()}")
                 if c.name == "communication-bound" else c for c in found]
    per_device = {d.device: parts_text(mean) for d in rows if (mean := d.mean())}
    evidence = _evidence(b, j, found, facts, per_device) | {
        "gpm": note.evidence, "allreduce": None if reduce is None else reduce.evidence()}
    evidence["predicted"] = _predicted(found, m, evidence, facts, rows)
    devices = "" if len(rows) < 2 else "; " + "; ".join(f"{d}: {t}" for d, t in
                                                         per_device.items())
    tail = devices
    if b.gpus_without_kernels and not any(c.name == "idle-gpus" for c in found):
        tail += f"; GPUs that ran no kernel: {', '.join(b.gpus_without_kernels)}"
    tail += f"; {note.text}" if note.text else ""
    tail += "".join(f"; {n}" for n in b.notes)
    if not found:
        return _calm(head, m, facts, check_id, evidence, tail)
    text = f"{head}: {found[0].text}" + "".join(f"; also {c.text}" for c in found[1:]) + \
        f" ({parts_text(m)}){tail}"
    return Finding(check_id, "warn", text, evidence, advice=advice(found),
                   actions=actions(found, evidence["predicted"], evidence.get("step_s")),
                   title=cause_title(found[0].name, found[0].share,
                                     found[0].evidence.get("step_s", m.period_s), facts.loop,
                                     _under(found[0])))


EAGER_BOUND = 0.50  # dispatch (Python and TensorFlow's eager path) at least this share


def eager(split: dict[str, Any] | None, facts: ProgramFacts, *,
          check_id: str = "run.bottleneck") -> Finding:
    """An eager loop's profiled steps (gpudiag.run.eagertrace.eager_split): the ops' own
    time against their dispatch from Python; host-bound eager execution when the dispatch
    is at least EAGER_BOUND of the step, with the fix at the step's line."""
    head = f"{facts.loop + ': ' if facts.loop else ''}"
    if split is None or split["period_s"] <= 0:
        return Finding(check_id, "skip", f"{head}no complete eager step in the trace",
                       {"predicted": whatif.nothing_measured("no complete eager step")},
                       title="no complete eager step in the trace")
    period, op, wait, dispatch = (split[k] for k in ("period_s", "op_s", "input_s",
                                                      "dispatch_s"))
    parts = {"period_s": period, "compute_s": op, "communication_s": 0.0, "input_s": wait,
             "host_s": dispatch, "host_between_calls_s": 0.0, "idle_s": 0.0, "copy_s": 0.0}
    share = dispatch / period
    head += (f"{ms(period)} per step over {split['steps']} profiled step(s) of an eager loop "
             f"(host step markers, one gradient call to the next)")
    text = (f"the ops' kernels ran {ms(op)} of the step ({pct(op / period)}, "
            f"{split['ops_per_step']:.0f} ops a step), input {ms(wait)}, and Python "
            f"dispatching the ops one by one the other {ms(dispatch)} ({pct(share)})")
    evidence: dict[str, Any] = {"eager": split, "step_s": period, "parts_s": {
        "/host:CPU": parts}, "shares": {"compute": op / period, "input": wait / period,
                                        "host": share}, "thresholds": {"eager": EAGER_BOUND},
        "causes": ["eager"] if share >= EAGER_BOUND else []}
    if share < EAGER_BOUND:
        evidence["predicted"] = whatif.predict([], parts, evidence)
        return Finding(check_id, "ok", f"{head}: no bottleneck stands out; {text}", evidence,
                       title=title(f"eager loop: no bottleneck stands out in a "
                                   f"{duration(period)} step", "eager loop: no bottleneck"))
    evidence["predicted"] = {**whatif.host_bound(parts, eager=True), "cause": "eager"}
    eager, predicted = facts.eager or {}, whatif.as_prediction(evidence["predicted"], period)
    return Finding(check_id, "warn", f"{head}: host-bound eager execution: {text}", evidence,
                   actions=(Action(str(eager.get("action") or WRAP), eager_where(eager),
                                   predicted),),
                   advice=str(eager.get("fix") or "wrap the step in tf.function"),
                   title=cause_title("eager", share, period, facts.loop))
