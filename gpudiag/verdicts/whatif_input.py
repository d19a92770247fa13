"""The input-bound model of gpudiag.verdicts.whatif: the step a pipeline's fixes should
give (parallel map, prefetch, cache, the generator replaced; its docstring says how), and
the pipeline's fixes by name: those a pipeline lacks, and those run B's pipeline made over
run A's (what `gpudiag diff` holds B to).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.verdicts.prediction import Parts, a_number, machine_load, no_number


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


def _producer_fix(calls: Sequence[Mapping[str, Any]], cores: float, epochs: int | None,
                  applied: frozenset[str] | None = None
                  ) -> tuple[list[str], float, bool, bool] | str:
    """The fixes the finding's advice gives (gpudiag.verdicts.pipeline), or those of
    ``applied`` among them: the parallelism a parallel map gets, prefetch, cache, the
    generator replaced; or why there is none."""
    missing = missing_fixes(calls, epochs)
    if not missing:
        return ("the pipeline already maps in parallel and prefetches: the fix is cheaper "
                "per-element work, which no measurement here sizes")
    use = [f for f in missing if applied is None or f in applied]
    words = {"parallel": f"parallel map on {cores:g} core{'s' if cores != 1 else ''}",
             "generator": "from_tensor_slices instead of the generator",
             "prefetch": "prefetch", "cache": "cache"}
    return ([words[f] for f in use], cores if "parallel" in use else 1, "cache" in use,
            "generator" in use)


def cpu_use_parts(cpu_use: Mapping[str, Any] | None) -> dict[str, float]:
    """A run's measured CPU use (observation's ``cpu_use``) as the model's parts: the
    cores the program kept busy, and the machine's 1-minute load average when judged."""
    use = cpu_use or {}
    return {k: float(use[k]) for k in ("busy_cores", "load_1min")
            if isinstance(use.get(k), int | float) and use.get(k)}


def usable_cores(p: Parts, calls: Sequence[Mapping[str, Any]], cores: int
                 ) -> tuple[float, float | None]:
    """The cores a parallel map's threads can have, and the cores other work held (None:
    not limited): the machine's less the load average's part that is not the program's
    own (``load_1min`` less ``busy_cores``, both measured), at least 1. Measured
    (docs/accuracy.md): a map of small matmuls on 2 cores with a busy process on each gained
    nothing from num_parallel_calls where idle cores were predicted to give 0.66 the step.
    Not limited where either was not measured, nor for a map that runs Python (a
    py_function: its work may be a wait, a file read, that holds no core; measured: such a
    map gained 0.5 the step at a load of 4 on 2 cores)."""
    load, busy = p.get("load_1min"), p.get("busy_cores")
    maps = [c for c in calls if c.get("method") in ("map", "interleave")]
    if load is None or not busy or any(c.get("python_ops") for c in maps):
        return float(cores), None
    other = max(0.0, load - busy)
    return max(1.0, min(float(cores), round(cores - other, 1))), other


def input_bound(p: Parts, calls: Sequence[Mapping[str, Any]], cores: int,
                epochs: int | None = None, applied: frozenset[str] | None = None
                ) -> dict[str, Any]:
    """The input-bound fix's step; ``applied``: only those FIXES (None: every one missing),
    what `gpudiag diff` holds a run to when it made some of them. Its threads get the
    cores other work leaves (usable_cores); where that is fewer than the machine's, the
    interval's low end is the step on idle cores (the other work may yield them)."""
    usable, other = usable_cores(p, calls, cores)
    out = _input_bound(p, calls, cores, usable, other, epochs, applied)
    if usable < cores and out.get("step_s") is not None:
        idle = _input_bound(p, calls, cores, float(cores), None, epochs, applied)
        low = min(out.get("assumed_low_s", out["step_s"]), idle["step_s"])
        out["assumed_low_s"] = low
        out["assumed_low_from"] = ("its assumption's other end (the other work yielding "
                                   "the machine's cores to the fix's threads)")
    return out


def _input_bound(p: Parts, calls: Sequence[Mapping[str, Any]], cores: int, usable: float,
                 other: float | None, epochs: int | None,
                 applied: frozenset[str] | None) -> dict[str, Any]:
    period, wait = p["period_s"], p["input_s"]
    if not calls:
        return no_number("input-bound", "the program's tf.data calls were not recorded (a trace "
                         "alone): which of parallel map, prefetch or cache is missing is unknown")
    fix = _producer_fix(calls, usable, epochs, applied)
    if isinstance(fix, str):
        return no_number("input-bound", fix)
    fixes, parallel, cache_fix, generator = fix
    if not fixes:
        return no_number("input-bound", "none of the pipeline's missing fixes was made")
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
    shared = (cpu + (0.0 if gone else producer)) / usable  # all of the CPU work, its cores
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
    load = p.get("load_1min", machine_load())
    busy = (f"; the machine's 1-minute load average was {load:.1f} on {cores} cores when "
            "this was judged: other work holds cores the fix's threads need, so this is "
            "optimistic") if load is not None and load > cores else ""
    if other is not None and usable < cores:
        busy = (f"; the machine's 1-minute load average was {load:.1f} on {cores} cores, "
                f"{other:.1f} of it other work (less the {busy_cores:.2f} cores the program "
                f"kept busy): the fix's threads get the {usable:g} core(s) it leaves, at "
                "least 1 (on idle cores: the interval's low end)")
    out = a_number("input-bound", " + ".join(fixes), period, step,
                    f"{'max' if overlapped else 'the sum (no prefetch: no overlap) of'}"
                    f"(consumer step = period - input wait"
                    f"{' - its host time while the Python ops ran (GIL)' if gil else ''}, "
                    f"producer per batch = "
                    f"{producer_text}, (consumer CPU + producer) / {usable:g} cores"
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
                     "busy_cores": busy_cores, "usable_cores": usable,
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
