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
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.report import Prediction

STEPS_PER_EXECUTION = 16  # the N the prediction assumes for steps_per_execution
BATCH_FACTOR = 2  # the larger batch per replica the communication prediction assumes

Parts = Mapping[str, float]  # period_s, compute_s, input_s, communication_s, host_s, ...


def available_cores() -> int:
    """The cores this process may run on (a parallel map's parallelism at most)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_load() -> float | None:
    """This machine's 1-minute load average (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None


def nothing_measured(reason: str | None) -> dict[str, Any]:
    """A bottleneck finding without a measured step: no prediction, and why."""
    return _none("", f"no measured step to replay ({reason or 'no trace'})")


def _none(cause: str, why: str) -> dict[str, Any]:
    return {"cause": cause, "step_s": None, "why": why}


def _out(cause: str, fix: str, period: float, step: float, model: str,
         inputs: dict[str, Any]) -> dict[str, Any]:
    return {"cause": cause, "fix": fix, "step_s": step,
            "speedup": period / step if step > 0 else None, "model": model,
            "inputs": {"period_s": period, **inputs}}


def _has(calls: Sequence[Mapping[str, Any]], method: str) -> bool:
    return any(c.get("method") == method for c in calls)


# The input pipeline's fixes, by name: what `gpudiag diff` reads from B's recorded calls to
# hold B to the prediction for the change it made (changes_made)
FIXES = ("parallel", "generator", "prefetch", "cache")


def _serial(calls: Sequence[Mapping[str, Any]]) -> bool:
    return any(c.get("method") in ("map", "interleave")
               and (c.get("args") or {}).get("num_parallel_calls") is None for c in calls)


def missing_fixes(calls: Sequence[Mapping[str, Any]], epochs: int | None) -> list[str]:
    """The FIXES a pipeline lacks (gpudiag.verdicts.pipeline's advice): a serial map,
    a generator, no prefetch, an in-memory set mapped every epoch without cache."""
    maps = [c for c in calls if c.get("method") in ("map", "interleave")]
    # never a cache after a map that draws random numbers, runs Python gpudiag cannot see
    # into, or follows a shuffle (it would freeze the draws or the order)
    first_map = next(i for i, c in enumerate(calls) if c in maps) if maps else 0
    cache_fix = bool(epochs and epochs > 1 and maps and not _has(calls, "cache") and not any(
        c.get("random_ops") or c.get("python_ops") for c in maps) and not _has(
        calls[:first_map], "shuffle") and (
        _has(calls, "from_tensor_slices") or _has(calls, "from_tensors")))
    return [f for f, lacking in (("parallel", _serial(calls)),
                                 ("generator", _has(calls, "from_generator")),
                                 ("prefetch", not _has(calls, "prefetch")),
                                 ("cache", cache_fix)) if lacking]


def changes_made(calls_a: Sequence[Mapping[str, Any]], calls_b: Sequence[Mapping[str, Any]]
                 ) -> frozenset[str]:
    """Which FIXES run B's recorded pipeline made over run A's."""
    made = {"parallel": _serial(calls_a) and not _serial(calls_b),
            "generator": _has(calls_a, "from_generator") and not _has(calls_b,
                                                                       "from_generator"),
            "prefetch": not _has(calls_a, "prefetch") and _has(calls_b, "prefetch"),
            "cache": not _has(calls_a, "cache") and _has(calls_b, "cache")}
    return frozenset(f for f, yes in made.items() if yes)


def change_key(applied: Sequence[str] | frozenset[str]) -> str:
    """``parallel + prefetch``: a set of FIXES in FIXES' order (by_change's keys)."""
    return " + ".join(f for f in FIXES if f in applied)


def _producer_fix(calls: Sequence[Mapping[str, Any]], cores: int, epochs: int | None,
                  applied: frozenset[str] | None = None
                  ) -> tuple[list[str], int, bool, bool] | str:
    """The fixes the finding's advice gives (gpudiag.verdicts.pipeline), or those of
    ``applied`` among them: the parallelism a parallel map gets, prefetch, cache, the
    generator replaced; or why there is none."""
    missing = missing_fixes(calls, epochs)
    if not missing:
        return ("the pipeline already maps in parallel and prefetches: the fix is cheaper "
                "per-element work, which no measurement here sizes")
    use = [f for f in missing if applied is None or f in applied]
    words = {"parallel": f"parallel map on {cores} cores",
             "generator": "from_tensor_slices instead of the generator",
             "prefetch": "prefetch", "cache": "cache"}
    return ([words[f] for f in use], cores if "parallel" in use else 1, "cache" in use,
            "generator" in use)


def input_bound(p: Parts, calls: Sequence[Mapping[str, Any]], cores: int,
                epochs: int | None = None, applied: frozenset[str] | None = None
                ) -> dict[str, Any]:
    """The input-bound fix's step; ``applied``: only those FIXES (None: every one missing),
    what `gpudiag diff` holds a run to when it made some of them."""
    period, wait = p["period_s"], p["input_s"]
    if not calls:
        return _none("input-bound", "the program's tf.data calls were not recorded (a trace "
                     "alone): which of parallel map, prefetch or cache is missing is unknown")
    fix = _producer_fix(calls, cores, epochs, applied)
    if isinstance(fix, str):
        return _none("input-bound", fix)
    fixes, parallel, cache_fix, generator = fix
    if not fixes:
        return _none("input-bound", "none of the pipeline's missing fixes was made")
    prefetched = _has(calls, "prefetch")
    overlapped = prefetched or "prefetch" in fixes
    gone = cache_fix or generator
    # the step's host time while the program's Python ran inside tf.data (the generator,
    # a py_function) is the step's Python waiting for the GIL: it goes where that Python
    # leaves the step's way (replaced, or cached after the first epoch)
    gil = p.get("host_python_ops_s", 0.0) if gone else 0.0
    consumer = period - wait - gil
    # the producer's work per batch: the wait (a pipeline without prefetch makes the batch
    # inside the step's GetNext), plus the consumer's step it already overlapped
    producer = wait + (consumer if prefetched else 0.0)
    after = 0.0 if gone else producer / parallel
    # the consumer's own CPU time: on a CPU device its step less the time it idled; on an
    # accelerator the host part (the ops run on the device); with the producer's work it
    # shares the same cores
    cpu = p.get("host_s", 0.0) if p.get("accelerator") else consumer - p.get("idle_s", 0.0)
    shared = (cpu + (0.0 if gone else producer)) / cores  # all of the CPU work, every core
    # where the program's CPU use was measured (the cores it kept busy in the steps after
    # the window): a fix that keeps the producer's work (a parallel map, prefetch) runs it
    # on those same cores, so the step is at least their busy share of the period
    busy_cores = p.get("busy_cores")
    held = None
    if busy_cores and not gone:
        held = min(1.0, busy_cores / cores) * period
        shared = max(shared, held)
    # with prefetch the producer overlaps the consumer; without it, each batch is made
    # inside the step's GetNext, after the step before
    step = max(consumer, after, shared) if overlapped else consumer + after
    bound = "serial" if not overlapped else "consumer" if step == consumer else \
        "producer" if step == after else "cores"
    producer_text = ("0 after the first epoch (cache)" if cache_fix else
                     "0 (the generator's Python replaced by slices of in-memory tensors, "
                     "whose cost the trace does not measure: a lower bound)" if generator
                     else f"{'(wait + consumer)' if prefetched else 'wait'} / {parallel}")
    load = machine_load()
    busy = (f"; the machine's 1-minute load average was {load:.1f} on {cores} cores when "
            "this was judged: other work holds cores the fix's threads need, so this is "
            "optimistic") if load is not None and load > cores else ""
    out = _out("input-bound", " + ".join(fixes), period, step,
                f"{'max' if overlapped else 'the sum (no prefetch: no overlap) of'}"
                f"(consumer step = period - input wait"
                f"{' - its host time while the Python ops ran (GIL)' if gil else ''}, "
                f"producer per batch = "
                f"{producer_text}, (consumer CPU + producer) / {cores} cores"
                + (f", at least the period x the {busy_cores:.2f} of {cores} cores the "
                   "program kept busy after its profiled window (measured: the producer's "
                   "work stays on them)" if held is not None else "")
                + f"); {cores} "
                "cores: this machine's (os.sched_getaffinity), where the program ran under "
                "`gpudiag run`; for a trace recorded elsewhere the prediction assumes them"
                + busy,
                {"input_wait_s": wait, "gil_wait_s": gil, "consumer_s": consumer,
                 "producer_s": producer,
                 "producer_after_s": after, "consumer_cpu_s": cpu, "parallelism": parallel,
                 "cores": cores, "cores_from": "this machine (os.sched_getaffinity)",
                 "cache": cache_fix, "generator": generator, "bound": bound,
                 "busy_cores": busy_cores,
                 "load_average_1min": load})
    return out | _input_ends(out, parallel > 1 and not gone,
                             bool(gone and cores > 1 and not p.get("accelerator")),
                             prefetched, overlapped, shared)


def _input_ends(out: dict[str, Any], parallel: bool, gone: bool, prefetched: bool,
                overlapped: bool, shared: float) -> dict[str, float]:
    """The input-bound model's assumptions, their other ends (``out``: its prediction)."""
    i = out["inputs"]
    consumer, producer, after, cores = i["consumer_s"], i["producer_s"], \
        i["producer_after_s"], i["cores"]
    ends = {}
    if parallel:
        # a parallel map whose work does not scale over the cores (many tiny ops, or
        # Python under the GIL: measured, a map of 60 small ops made its batches 9 %
        # faster on 2 cores, benchmarks/RESULTS.md); and a pipeline with no prefetch of its own
        # already overlapped by the one TensorFlow injects (tf.data's inject_prefetch, on
        # by default): its producer may be the whole period
        injected = 0.0 if prefetched else consumer
        ends["assumed_high_s"] = max(consumer, producer + injected, shared) \
            if overlapped else consumer + producer
    if gone:
        # where the producer's work leaves: the consumer's ops ran on the cores beside a
        # producer thread busy throughout (it was the bottleneck); without it they may
        # have every core: at best (cores - 1) / cores of their time
        ends["assumed_low_s"] = min(out["step_s"], max(after, consumer * (cores - 1) / cores))
    return ends


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
    out = _out("overhead-bound", f"steps_per_execution={n}", period, step, model,
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
        return _none("host-bound", "an eager step under tf.function: the trace's host time "
                     "holds Python and the eager per-op dispatch together, and what the graph "
                     "executor's dispatch of the same ops costs, and which of them Grappler "
                     "fuses, is not in an eager trace, so no measured number; the ops' time "
                     f"measured eagerly, {ops_ms:.3f} ms, is no floor either (each eager op "
                     "carries work of its own that the graph does not)")
    between = p.get("host_between_calls_s", 0.0)
    return _out("host-bound", "the Python between the step calls moved into the "
                "tf.function or done every N steps", period, period - between,
                "period - Python between the step calls", {"between_calls_s": between})


def communication_bound(p: Parts, allreduce: Mapping[str, Any] | None) -> dict[str, Any]:
    period, comm = p["period_s"], p["communication_s"]
    if not allreduce or not allreduce.get("achieved_bytes_per_s"):
        return _none("communication-bound", "the all-reduce's gradient bytes are unknown "
                     "(not a MirroredStrategy program gpudiag saw), so its bandwidth is too")
    k = BATCH_FACTOR
    moved = float(allreduce["gradient_bytes_per_replica"]) / float(
        allreduce["achieved_bytes_per_s"])
    # what grows with the batch: the ops, the input, the waits for the other replicas'
    # ops; the host's per-step work (Python, dispatch) and the gradients' bytes do not
    host = p.get("host_s", 0.0)
    grows = period - comm - host
    step = grows * k + host + moved
    out = _out("communication-bound", f"batch per replica x{k}", period, step,
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
        return _none("idle-gpus", "every device ran work")
    step = period - p["compute_s"] + p["compute_s"] * busy / total
    return _out("idle-gpus", f"a strategy over all {total} devices", period, step,
                f"period - compute + compute x {busy} / {total}",
                {"compute_s": p["compute_s"], "busy_devices": busy, "devices": total})


# each model's stated assumption, whose other end bounds its interval (with_interval)
ASSUMED = {
    "communication-bound": "its assumption's other end (no op's time growing with the "
                           "batch)",
    "overhead-bound": "its assumption's other end (the gaps between ops paid once a call "
                      "too)",
    "input-bound": "its assumption's other end (a parallel map whose work does not scale "
                   "over the cores, a pipeline already overlapped by TensorFlow's injected "
                   "prefetch)",
    "input-bound low": "its assumption's other end (the consumer's ops given the cores "
                       "the producer's thread held)",
}


def with_interval(predicted: dict[str, Any], per_step: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """``predicted`` (for the mean step) with its interval: ``step_s_low`` and
    ``step_s_high`` from the same model replayed on each profiled step that was measured
    (``per_step``: each step's own prediction; the 95 % interval of their median from 6
    steps on, else their range), widened to the other end of the model's stated
    assumption where it has one (ASSUMED: ``assumed_low_s`` / ``assumed_high_s``). No
    interval where there is no number."""
    from gpudiag.verdicts.stats import spread

    step = predicted.get("step_s")
    if step is None:
        return predicted
    steps = [float(x["step_s"]) for x in per_step if x.get("step_s") is not None]
    level = spread(steps)
    low, high = (level[1] if level else (step, step))
    low, high = min(low, step), max(high, step)
    froms = [f"the model replayed on {level[2]} profiled steps"] if level else \
        ["no per-step replay (the mean step only)"]
    assumed = predicted.get("assumed_low_s")
    if assumed is not None and assumed < low:
        low = assumed
        cause = str(predicted.get("cause"))
        froms.append(ASSUMED.get(f"{cause} low", ASSUMED.get(cause,
                                                               "its assumption's other end")))
    assumed = predicted.get("assumed_high_s")
    if assumed is not None and assumed > high:
        high = assumed
        froms.append(ASSUMED.get(str(predicted.get("cause")), "its assumption's other end"))
    return {**predicted, "step_s_low": low, "step_s_high": high,
            "interval_from": "; ".join(froms)}


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


def interval_text(predicted: Mapping[str, Any], scale: float = 1.0) -> str:
    """``1.90 ms (1.62-2.31 ms)``: the predicted step (times ``scale``) with its interval."""
    step = predicted.get("step_s")
    if step is None:
        return "no prediction"
    low, high = predicted.get("step_s_low"), predicted.get("step_s_high")
    span = f" ({low * scale * 1e3:.2f}-{high * scale * 1e3:.2f} ms)" \
        if low is not None and high is not None else ""
    return f"{step * scale * 1e3:.2f} ms{span}"


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
        return _none("", "no bottleneck stands out: no fix to predict")
    cause = causes[0]
    if parts.get("period_s", 0.0) <= 0:
        return _none(cause, "the trace holds no complete step")
    if cause == "input-bound":
        devices = evidence.get("parts_s") or {}
        accelerator = any("GPU" in d.upper() or "TPU" in d.upper() for d in devices)
        busy = (evidence.get("cpu_use") or {}).get("busy_cores")
        return input_bound({**parts, "accelerator": float(accelerator),
                            **({"busy_cores": float(busy)} if busy else {})},
                           evidence.get("dataset_calls") or [], cores or available_cores(),
                           epochs)
    if cause == "overhead-bound":
        if steps_a_call:
            return _none(cause, f"the program already runs {steps_a_call:.0f} steps a call; the "
                         "fix left (XLA, a larger batch) changes each op's own cost, which "
                         "no trace of the unfused ops measures")
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
    return _none(cause, NO_MODEL.get(cause, f"no model for {cause}"))


def as_prediction(predicted: Mapping[str, Any] | None) -> Prediction | None:
    """A finding's ``evidence.predicted`` as an action's Prediction: the step time with its
    interval where the prediction carries one (``step_s_low``/``step_s_high``; None
    otherwise), and
    the fix and the model as its basis; without a number, the reason there is none. None:
    no prediction at all."""
    if not predicted:
        return None
    step = predicted.get("step_s")
    if step is None:
        return Prediction(None, basis=str(predicted.get("why") or "no prediction"))
    low, high = predicted.get("step_s_low"), predicted.get("step_s_high")
    basis = "; ".join(str(predicted[k]) for k in ("fix", "model") if predicted.get(k))
    return Prediction(float(step), None if low is None else float(low),
                      None if high is None else float(high), basis)
