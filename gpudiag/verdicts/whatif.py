"""What-if: the step time a bottleneck's fix should give, replayed from the measured step.

Pure: a bottleneck finding's measured mean step (its parts in seconds, gpudiag.readers.
stepbreakdown) and the facts beside it (the program's tf.data calls, the all-reduce's
bytes and achieved bandwidth, the devices that ran nothing) in; ``evidence.predicted`` out:
``{"cause", "fix", "step_s", "speedup", "model", "inputs"}`` with the interval
``step_s_low`` / ``step_s_high`` (with_interval: the model replayed on each profiled step,
widened to the model's stated bounds), or, where no honest number exists,
``{"cause", "step_s": None, "why"}``. Each model changes only the part the fix
acts on and keeps the others as measured (docs/why-slow-details.md, "What-if"):

- input-bound, parallel map / prefetch / cache / the generator replaced: the consumer's
  step is the step without its input wait, ``period - input``; the producer's work per
  batch is what the wait measured (plus the consumer's step where the pipeline already
  prefetched), divided by the parallelism a parallel map gets (the cores; 1 where the map
  already runs in parallel), zero after the first epoch with cache or with the generator
  replaced by in-memory tensors; with prefetch the two overlap, on the same cores:
  ``max(consumer, producer, (consumer's CPU time + producer) / cores)``. The cores are
  this machine's (os.sched_getaffinity), where `gpudiag run` ran the program.
- overhead-bound, steps_per_execution=N (or N steps per tf.function call): the call's
  host time before its first op and after its last, and the Python between the calls, is
  per-call work, paid once per N steps (the gaps between ops stay):
  ``period - per_call + per_call / N``, N = STEPS_PER_EXECUTION.
- host-bound (Python between the step calls, moved into the tf.function or done every
  N steps): ``period - between``; an eager loop (no step function: the trace is one step,
  every op dispatched from Python) under tf.function: no number (the graph executor's
  per-op dispatch, and what Grappler fuses, is not in an eager trace); the ops' eager time
  is named, and not as a floor (measured: 0.62 ms of eager ops a step against 0.35 ms a
  step under tf.function, benchmarks/RESULTS.md).
- communication-bound, a larger batch per replica (BATCH_FACTOR times): the per-example
  work scales, the host's per-step work and the all-reduce of the same gradient bytes at
  the measured bandwidth do not: ``(period - comm - host) * k + host + bytes / bandwidth``
  (an upper bound: every op's time is taken to grow with the batch), the step of the
  larger batch (what the fixed run measures per step), its speedup in examples per second.
- idle devices, a strategy over every device: the busy devices' compute spread over all
  of them: ``period - compute + compute * busy / all``.

The input-bound model is whatif_input.py's; a prediction's record and interval
prediction.py's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.report import Prediction
from gpudiag.verdicts.prediction import (
    Parts,
    a_number,
    available_cores,
    machine_load,
    no_number,
    with_interval,
)
from gpudiag.verdicts.whatif_input import (
    change_key,
    cpu_use_parts,
    input_bound,
    missing_fixes,
)

STEPS_PER_EXECUTION = 16  # the N the prediction assumes for steps_per_execution
BATCH_FACTOR = 2  # the larger batch per replica the communication prediction assumes


def nothing_measured(reason: str | None) -> dict[str, Any]:
    """A bottleneck finding without a measured step: no prediction, and why."""
    return no_number("", f"no measured step to replay ({reason or 'no trace'})")


def overhead_bound(p: Parts) -> dict[str, Any]:
    """The work paid once a call is paid once per N steps: the host time in the call
    before its first op and after its last (entering and leaving the function, the
    executor's set-up) and the Python between the calls (a fit's callbacks and progress
    bar run once a call); the gaps between the ops stay, paid every step. A breakdown
    recorded before the edges were measured takes all of the call's host time as
    per-call (an over-estimate of the gain, said in the model)."""
    period = p["period_s"]
    n = STEPS_PER_EXECUTION
    between = p.get("host_between_calls_s", 0.0)
    edges = p.get("host_call_edges_s")
    if edges is None:
        per_call = p["host_s"] - between
        model = (f"period - per-call overhead + overhead / {n}, the whole of the call's "
                 "host time taken as per-call (this breakdown does not separate the gaps "
                 "between ops, paid every step)")
    else:
        per_call = edges + between
        model = (f"period - per-call work + per-call work / {n}: the call's host time "
                 "before its first op and after its last, and the Python between the "
                 "calls; the gaps between ops stay")
    step = period - per_call + per_call / n
    out = a_number("overhead-bound", f"steps_per_execution={n}", period, step, model,
                   {"overhead_s": per_call, "call_edges_s": edges, "between_calls_s": between,
                    "steps_per_execution": n})
    # the model's assumption, its other end: the gaps between the ops paid once a call too
    # (which of the call's host time is per call, the trace cannot tell for certain)
    out["assumed_low_s"] = period - p["host_s"] + p["host_s"] / n
    return out


def host_bound(p: Parts, eager: bool) -> dict[str, Any]:
    period = p["period_s"]
    if eager:
        ops_ms = (p["compute_s"] + p["communication_s"] + p["input_s"]) * 1e3
        return no_number("host-bound", "an eager step under tf.function: the trace's host time "
                         "holds Python and the eager per-op dispatch together, and what the graph "
                         "executor's dispatch of the same ops costs, and which of them Grappler "
                         "fuses, is not in an eager trace, so no measured number; the ops' time "
                         f"measured eagerly, {ops_ms:.3f} ms, is no floor either (each eager op "
                         "carries work of its own that the graph does not)")
    between = p.get("host_between_calls_s", 0.0)
    return a_number("host-bound", "the Python between the step calls moved into the "
                    "tf.function or done every N steps", period, period - between,
                    "period - Python between the step calls", {"between_calls_s": between})


def communication_bound(p: Parts, allreduce: Mapping[str, Any] | None) -> dict[str, Any]:
    period, comm = p["period_s"], p["communication_s"]
    if not allreduce or not allreduce.get("achieved_bytes_per_s"):
        return no_number("communication-bound", "the all-reduce's gradient bytes are unknown "
                         "(not a MirroredStrategy program gpudiag saw), so its bandwidth is too")
    k = BATCH_FACTOR
    moved = float(allreduce["gradient_bytes_per_replica"]) / float(
        allreduce["achieved_bytes_per_s"])
    # what grows with the batch: the ops, the input, the waits for the other replicas'
    # ops; the host's per-step work (Python, dispatch) and the gradients' bytes do not
    host = p.get("host_s", 0.0)
    grows = period - comm - host
    step = grows * k + host + moved
    out = a_number("communication-bound", f"batch per replica x{k}", period, step,
                   f"(period - communication - host) x {k} + host + gradient bytes / measured "
                   f"bandwidth: the step of the {k}x batch, every op's time taken to grow with "
                   "the batch (an upper bound: an op reading its weights takes as long for a "
                   "batch twice as large; speedup: examples per second)",
                   {"communication_s": comm, "host_s": host, "allreduce_s": moved,
                    "batch_factor": k})
    out["speedup"] = period * k / step if step > 0 else None
    out["step_s_per_original_batch"] = step / k
    # the model's stated assumption, both ways: every op's time grows with the batch (the
    # step above, the most it can be) or none does (the least)
    out["assumed_low_s"] = grows + host + moved
    return out


def idle_devices(p: Parts, busy: int, total: int) -> dict[str, Any]:
    period = p["period_s"]
    if total <= busy or busy <= 0:
        return no_number("idle-gpus", "every device ran work")
    step = period - p["compute_s"] + p["compute_s"] * busy / total
    return a_number("idle-gpus", f"a strategy over all {total} devices", period, step,
                    f"period - compute + compute x {busy} / {total}",
                    {"compute_s": p["compute_s"], "busy_devices": busy, "devices": total})


def input_bound_by_change(parts: Parts, per_step: Sequence[Parts],
                          calls: Sequence[Mapping[str, Any]], cores: int,
                          epochs: int | None) -> dict[str, dict[str, Any]]:
    """The input-bound prediction for each set of the pipeline's missing fixes that a
    change could make (change_key -> step_s with its interval), for `gpudiag diff` to hold
    B to the change it made, not to all of them."""
    import itertools

    missing = missing_fixes(calls, epochs)
    out: dict[str, dict[str, Any]] = {}
    for n in range(1, len(missing) + 1):
        for subset in itertools.combinations(missing, n):
            applied = frozenset(subset)
            pred = with_interval(input_bound(parts, calls, cores, epochs, applied), [
                input_bound(step, calls, cores, epochs, applied) for step in per_step])
            if pred.get("step_s") is not None:
                out[change_key(applied)] = {k: pred.get(k) for k in (
                    "fix", "step_s", "step_s_low", "step_s_high", "interval_from")}
    return out


NO_MODEL = {
    "launch-bound": "launch overhead after XLA fusion depends on the fused kernels, which "
                    "the trace cannot show before they exist",
    "small-kernels": "a larger batch's kernel times are not in the trace",
    "straggler": "what delays the late replica is not measured",
}


def predict(causes: Sequence[str], parts: Parts, evidence: Mapping[str, Any], *,
            epochs: int | None = None, cores: int | None = None,
            steps_a_call: float | None = None) -> dict[str, Any]:
    """The prediction for the first (the bottleneck's) cause, from a finding's mean step
    ``parts`` and its ``evidence`` (dataset_calls, allreduce, gpus_without_kernels,
    parts_s, steps_from); ``steps_a_call``: the steps each call already runs where more
    a call is in place (steps_per_execution, a loop inside the tf.function). A number
    carries the machine it was judged on (``machine``: its 1-minute load average and
    cores: `gpudiag diff` says when load makes the comparison weak)."""
    out = _predict(causes, parts, evidence, epochs=epochs, cores=cores,
                   steps_a_call=steps_a_call)
    if out.get("step_s") is not None:
        out["machine"] = {"load_average_1min": machine_load(),
                          "cores": cores or available_cores()}
    return out


def _predict(causes: Sequence[str], parts: Parts, evidence: Mapping[str, Any], *,
             epochs: int | None = None, cores: int | None = None,
             steps_a_call: float | None = None) -> dict[str, Any]:
    if not causes:
        return no_number("", "no bottleneck stands out: no fix to predict")
    cause = causes[0]
    if parts.get("period_s", 0.0) <= 0:
        return no_number(cause, "the trace holds no complete step")
    if cause == "input-bound":
        devices = evidence.get("parts_s") or {}
        accelerator = any("GPU" in d.upper() or "TPU" in d.upper() for d in devices)
        return input_bound({**parts, "accelerator": float(accelerator),
                            **cpu_use_parts(evidence.get("cpu_use"))},
                           evidence.get("dataset_calls") or [], cores or available_cores(),
                           epochs)
    if cause == "overhead-bound":
        if steps_a_call:
            return no_number(cause, f"the program already runs {steps_a_call:.0f} steps a call; "
                             "the fix left (XLA, a larger batch) changes each op's own cost, "
                             "which no trace of the unfused ops measures")
        return overhead_bound(parts)
    if cause == "host-bound":
        return host_bound(parts, evidence.get("steps_from") == "the whole trace")
    if cause == "communication-bound":
        return communication_bound(parts, evidence.get("allreduce"))
    if cause == "idle-gpus":
        idle = evidence.get("gpus_without_kernels") or []
        gpus = [d for d in (evidence.get("parts_s") or {}) if "GPU" in d.upper()]
        total = max(len(gpus), len(idle))
        return idle_devices(parts, total - len(idle), total)
    return no_number(cause, NO_MODEL.get(cause, f"no model for {cause}"))


def as_prediction(predicted: Mapping[str, Any] | None, step_s: float | None = None
                  ) -> Prediction | None:
    """A finding's ``evidence.predicted`` as an action's Prediction: the step time with its
    interval where the prediction carries one (``step_s_low``/``step_s_high``; None
    otherwise), from the step its model replayed (its ``inputs.period_s``, else ``step_s``:
    the profiled window's), and the fix and the model as its basis; without a number, the
    reason there is none. None: no prediction at all."""
    if not predicted:
        return None
    step = predicted.get("step_s")
    if step is None:
        return Prediction(None, basis=str(predicted.get("why") or "no prediction"))
    low, high = predicted.get("step_s_low"), predicted.get("step_s_high")
    basis = "; ".join(str(predicted[k]) for k in ("fix", "model") if predicted.get(k))
    base = (predicted.get("inputs") or {}).get("period_s") or step_s
    return Prediction(float(step), None if low is None else float(low),
                      None if high is None else float(high), basis,
                      None if base is None else float(base))
