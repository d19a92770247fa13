"""The causes of a slow step, each written once with its fix: what the trace shows (the
text) and what to change (the advice) are made together, by one function per cause.

Pure: a mean step (gpudiag.readers.stepbreakdown.StepParts), the trace's Breakdown, the
devices judged and what the program did (ProgramFacts) in; Cause records out. The finding
around them is gpudiag.verdicts.bottleneck's.

Thresholds, each a share of the mean step: waiting for input >= 20 % is input-bound,
5-20 % moderately (xprof's own, in its input-pipeline analysis). gpudiag's own, at the
same 20 %: host-to-device / device-to-host copies (copy-bound), the program's Python
between the step calls (host-bound), collective communication (communication-bound), a
GPU waiting for the host to launch work inside the step (launch-bound), one replica
starting a step after another (a straggler); GPU kernels >= 75 % of the step (GPU-bound:
the device is the limit); on the CPU, at 50 %, the step call's time with no op running
(overhead-bound). xprof advises mixed precision when float16/bfloat16 work is under 10 %.

Each share is held against its threshold with its interval (Judged.against, through
gpudiag.verdicts.stats.against): the mean step's share, and the interval of the profiled
steps' own shares (every judged device's; the median's 95 % CI from 6 steps on, else
their range). A clear side decides; an interval across the threshold names the cause
anyway, its text saying "near the threshold: X (interval), threshold Y", so that a share
near the line gives one status (warn) instead of either side by chance. A straggler's
skew is one number a window: a point.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudiag.layout.units import counted, duration
from gpudiag.layout.units import share as pct
from gpudiag.readers.gpukernels import KernelStats
from gpudiag.readers.stepbreakdown import Breakdown, DeviceBreakdown, StepParts
from gpudiag.records.run import DatasetCall
from gpudiag.report import Action
from gpudiag.verdicts import gpu_fill, stats
from gpudiag.verdicts.pipeline import (
    MODELLED,
    parallel_and_prefetched,
    pipeline_fixes,
    python_ops,
    random_ops,
    stage_fixes,
)
from gpudiag.verdicts.pipeline import fixes as pipeline_fix_list

INPUT_BOUND = 0.20  # xprof: "HIGHLY input-bound"
INPUT_MODERATE = 0.05  # xprof: "MODERATELY input-bound" from here
HOST_BOUND = 0.20
COMM_BOUND = 0.20
LAUNCH_BOUND = 0.20
COPY_BOUND = 0.20
GPU_BOUND = 0.75  # kernels running this share of the step: the GPU itself is the limit
HALF_ADVISED = 0.10  # xprof's overview: mixed precision advised below this share
OVERHEAD_BOUND = 0.50  # the CPU: TensorFlow's per-step work outweighs ops this small
SKEW_BOUND = 0.20
THRESHOLDS = {"input_bound": INPUT_BOUND, "input_moderate": INPUT_MODERATE,
              "host_bound": HOST_BOUND, "communication_bound": COMM_BOUND,
              "launch_bound": LAUNCH_BOUND, "copy_bound": COPY_BOUND, "gpu_bound": GPU_BOUND,
              "half_advised": HALF_ADVISED, "overhead_bound": OVERHEAD_BOUND,
              "straggler": SKEW_BOUND}
STEPS_PER_EXECUTION = ("compile(..., steps_per_execution=N) so that each call of the step "
                       "function runs N steps")


@dataclass(frozen=True)
class ProgramFacts:
    """What is known of the program beside its trace (all empty for `explain`): its
    tf.data calls, the step loop (its name and where it is called), the epochs, the
    strategy's replica devices (the devices judged), its GPUs as NVML sampled them
    (gpu_use.gpu_numbers; None: not sampled), and a MirroredStrategy step's gradient
    bytes per replica (None: unknown)."""

    calls: Sequence[DatasetCall] = ()
    loop: str | None = None
    called_at: dict[str, Any] | None = None
    epochs: int | None = None
    replicas: Sequence[str] = ()
    nvml_gpus: Sequence[dict[str, Any]] | None = None
    gradient_bytes: int | None = None
    # what the step series measured over the whole run (gpudiag.verdicts.run.hostcauses:
    # retracing, the program's callbacks), causes of their own beside the trace's
    host_causes: Sequence[Cause] = ()
    compile: dict[str, Any] | None = None  # Keras fit: its compile's line and arguments
    # the loop's input wait over the whole timed run (throughput.input_series): it decides
    # input-bound; the profiled window explains (None: not measured, the window decides)
    input_series: dict[str, Any] | None = None
    eager: dict[str, Any] | None = None  # an eager loop's step: hostcauses.eager_facts
    # with its "fix" (gpudiag.verdicts.bottleneck.eager)
    jit_compile: bool = False  # the step tf.function is XLA-compiled (jit_compile=True)
    # a Keras fit's steady-state step periods over the whole run (start to start, the
    # profiled steps left out), where its input wait is inside its graph (no input_series):
    # what the window is held to (window_missed)
    run_periods: Sequence[float] = ()
    window_input: dict[str, Any] | None = None  # window_missed's, set by the bottleneck verdict
    # the cores the program kept busy in the steps after its window (observation's
    # cpu_use: busy_cores, cores, steps): what a parallel map's threads would share
    cpu_use: dict[str, Any] | None = None


@dataclass(frozen=True)
class Cause:
    name: str  # input-bound | copy-bound | host-bound | launch-bound | gpu-bound |
    #            communication-bound | overhead-bound | straggler | idle-gpus | small-kernels
    share: float  # of the step
    text: str  # what the trace shows, with its numbers
    advice: str  # the fix for this cause
    evidence: dict[str, Any] = field(default_factory=dict)
    # the changes the advice names, each at the program's line where it is known
    actions: tuple[Action, ...] = ()
    # the action whose change evidence.predicted sizes (None: none of them)
    predicted_action: int | None = 0


@dataclass(frozen=True)
class Judged:
    """What a cause is judged on: the mean step of the devices judged, those devices,
    the whole breakdown, and the program's facts."""

    m: StepParts
    rows: Sequence[DeviceBreakdown]
    b: Breakdown
    facts: ProgramFacts

    @property
    def gpu(self) -> bool:
        return any(d.source == "device-plane" for d in self.rows)

    def kernels(self) -> list[KernelStats]:
        return [d.kernel_stats for d in self.rows if d.kernel_stats is not None]

    def against(self, part: Callable[[StepParts], float], threshold: float) -> stats.Against:
        """The mean step's share of ``part`` against ``threshold``, with the interval of the
        judged steps' own shares (module docstring)."""
        shares = [part(s) / s.period_s for d in self.rows for s in d.steps if s.period_s > 0]
        level = stats.spread(shares)
        return stats.against(self.m.share(part(self.m)), level[1] if level else None,
                             threshold, f"{level[2]} profiled steps" if level else "")


def near_words(a: stats.Against) -> str:
    """``; near the threshold: 48 % (41 %-55 %, ...), threshold 50 %`` for a share near
    its line, else nothing."""
    return f"; {a.words(pct)}" if a.near else ""


def ms(seconds: float) -> str:
    """A duration by gpudiag.layout.units' one rule (``32.6 ms``)."""
    return duration(seconds)


def us(seconds: float) -> str:
    return f"{seconds * 1e6:.1f} us"


def short_kernel(name: str) -> str:
    """A kernel's name without its template and argument lists (C++ demangled names run
    to hundreds of characters)."""
    name = re.sub(r"^void ", "", name)
    depth, out = 0, []
    for ch in name:
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif depth == 0:
            out.append(ch)
    return "".join(out).strip()[:80] or name[:80]


UNREPRESENTATIVE = 1.5  # the run's steps this much longer than the window's: not its state
MIN_RUN_PERIODS = 20


def window_missed(facts: ProgramFacts, m: StepParts) -> dict[str, Any] | None:
    """A Keras fit's input share over the whole run, when its profiled window did not see
    the run's steady state (None: it did, or nothing to hold it to).

    A fit takes its batches inside its own graph, so no Python ``next()`` is timed and
    only the window's few steps show the input wait. Those steps can be served from a
    full buffer (tf.data prefetches, and the profiler's start is a pause in which the
    pipeline runs ahead): on this project's machine one run of a serial-map fit whose steps
    wait for input 70-80 % had a window of 4 steps that waited 1 %. When the run's median step
    (95 % CI) is clearly longer than the window's (UNREPRESENTATIVE times, its whole
    interval), the time a step spends beyond the window's work other than input is the
    wait the window missed: share = 1 - (window's step - window's input) / run's step, with
    its interval from the run's median's."""
    if facts.input_series is not None or len(facts.run_periods) < MIN_RUN_PERIODS \
            or m.period_s <= 0 or m.share(m.input_s) >= INPUT_BOUND:
        return None
    ci = stats.median_ci(facts.run_periods)
    run = statistics.median(facts.run_periods)
    if ci is None or ci[0] < UNREPRESENTATIVE * m.period_s:
        return None
    other = max(0.0, m.period_s - m.input_s)
    return {"share": max(0.0, 1 - other / run), "low": max(0.0, 1 - other / ci[0]),
            "high": max(0.0, 1 - other / ci[1]), "run_step_s": run,
            "run_steps": len(facts.run_periods), "window_step_s": m.period_s,
            "window_other_s": other, "window_share": m.share(m.input_s),
            "statistic": "the run's steps against the window's"}


def _missed_words(e: dict[str, Any]) -> str:
    return (f" over the whole run: its steps took {ms(e['run_step_s'])} (median of "
            f"{e['run_steps']}, {pct(e['low'])}-{pct(e['high'])} from its 95 % CI), the "
            f"profiled window's {ms(e['window_step_s'])}, of which "
            f"{ms(e['window_other_s'])} not waiting for input: the rest of a step is the "
            f"wait the window did not see (its own steps waited {pct(e['window_share'])}; "
            "a fit takes its batches inside its graph, so only the window times them)")


def input_share(facts: ProgramFacts, m: StepParts) -> tuple[float, str, bool]:
    """The input share that decides, what it is read from, and whether its spread holds
    xprof's input-bound threshold (then the verdict says so instead of flipping). Over the
    whole run, when next()'s own cost on a full buffer was measured, only the wait beyond
    it is input waited for (prefetch cannot hide the rest)."""
    w = facts.input_series
    if w is None:
        missed = facts.window_input
        if missed is not None:
            return missed["share"], _missed_words(missed), input_against(facts, m).near
        return m.share(m.input_s), "", False
    d = w.get("hidden") or w
    spread = (f", {pct(d['low'])}-{pct(d['high'])} over blocks of steps"
              if d.get("low") is not None else "")
    near = input_against(facts, m).near
    floor = ""
    if w.get("hidden") is not None:
        floor = (f", {pct(w['share'])} with next()'s own {ms(w['floor']['floor_s'])} a call "
                 "on a full buffer (measured), which prefetch cannot hide")
    return d["share"], (f" over the whole run ({counted(w['steps'], 'step')}, the program's "
                        f"next(iterator) {ms(w['wait_s_per_step'])} a step{spread}{floor}; "
                        f"the profiled window: {pct(m.share(m.input_s))})"), near


def floor_note(facts: ProgramFacts) -> str | None:
    """next()'s own cost when it is a sizeable share of the step though the input is
    ready: not input to hide, a per-call cost to pay less often (None: not measured or
    small)."""
    w = facts.input_series
    if w is None or w.get("hidden") is None:
        return None
    own = w["share"] - w["hidden"]["share"]
    if own < INPUT_MODERATE:
        return None
    return (f"next(iterator) takes {ms(w['wait_s_median'])} a call (median; {pct(own)} of "
            f"the step) though its batch is ready: its own cost on a full buffer, "
            f"{ms(w['floor']['floor_s'])} measured, which prefetch cannot hide")


def input_against(facts: ProgramFacts, m: StepParts,
                  j: Judged | None = None) -> stats.Against:
    """The input share against xprof's INPUT_BOUND: over the whole run with its interval
    over resampled blocks of steps where the loop's waits were measured (gpudiag.verdicts.
    run.throughput.input_series; the wait beyond next()'s own cost on a full buffer where
    that was measured), else the profiled window's with its steps' (``j``)."""
    w = facts.input_series
    if w is not None:
        d = w.get("hidden") or w
        interval = (d["low"], d["high"]) if d.get("low") is not None else None
        return stats.against(d["share"], interval, INPUT_BOUND,
                             f"95 % CI over {w.get('blocks')} blocks of steps"
                             if interval else "")
    missed = facts.window_input
    if missed is not None:
        return stats.against(missed["share"], (missed["low"], missed["high"]), INPUT_BOUND,
                             f"from the 95 % CI of the run's median step "
                             f"({counted(missed['run_steps'], 'step')})")
    if j is not None:
        return j.against(lambda s: s.input_s, INPUT_BOUND)
    return stats.against(m.share(m.input_s), None, INPUT_BOUND)


def _input(j: Judged) -> Cause | None:
    m = j.m
    share, source, _ = input_share(j.facts, m)
    a = input_against(j.facts, m, j)
    near = a.near
    if a.side == stats.BELOW:
        return None
    calls = j.facts.calls
    fixes = pipeline_fixes(calls, j.facts.epochs)
    listed = pipeline_fix_list(calls, j.facts.epochs)
    actions = [Action(f.what, f.where) for f in listed]
    sized = next((i for i, f in enumerate(listed) if f.kind in MODELLED), None)
    out = []
    top = j.b.xprof.input_ops[0] if j.b.xprof and j.b.xprof.input_ops else None
    if top is not None:
        out.append(f"tf.data's time goes to {top.name} ({pct(top.self_share)} of the "
                   "input pipeline, xprof)")
    out += fixes
    if parallel_and_prefetched(calls):
        mapped = next((c for c in calls if c.method == "map" and c.caller
                       and c.caller.get("direct")), None)
        if not any(f.kind == "python" for f in listed):  # else said at the map
            actions.append(Action("vectorise the map: batch before it, with a function "
                                  "written for a batch", mapped.where if mapped else None))
        cache = ("" if any(random_ops(c) or python_ops(c) or c.method == "shuffle"
                           for c in calls) else
                 "cache() after the map when the data fits in memory, ")
        out.append("the program's pipeline already maps in parallel and prefetches: the "
                   "per-element work itself outruns the step; vectorise it (batch before "
                   "the map, with a function written for a batch: one call maps the whole "
                   f"batch), {cache}make the per-element ops fewer or cheaper, or "
                   "preprocess offline")
    elif not any(x.caller and x.caller.get("direct") for x in calls):
        out += stage_fixes(j.b.xprof.input_ops if j.b.xprof else [])
        out.append("the program's tf.data calls were not recorded: see the input pipeline "
                   "in TensorBoard's Profile tab")
    if source:
        text = f"{pct(share)} of the step waits for input{source}{near_words(a)}"
        missed = j.facts.window_input
        return Cause("input-bound", share, f"input-bound: {text}", "; ".join(out),
                     {"input_series": j.facts.input_series, "near_threshold": near,
                      "against": a.to_dict(), "window_input": missed}
                     | ({"step_s": missed["run_step_s"]} if missed else {}),
                     tuple(actions), sized)
    return Cause("input-bound", m.share(m.input_s),
                 f"input-bound: {pct(m.share(m.input_s))} of the step ({ms(m.input_s)} of "
                 f"{ms(m.period_s)}) waits for input{near_words(a)}", "; ".join(out),
                 {"near_threshold": near, "against": a.to_dict()}, tuple(actions), sized)


def _copy(j: Judged) -> Cause | None:
    m = j.m
    a = j.against(lambda s: s.copy_s, COPY_BOUND)
    if not j.gpu or a.side == stats.BELOW:
        return None
    h2d = sum(d.h2d_s for d in j.rows) / max(1, len(j.rows)) / max(1, len(j.b.step_names))
    d2h = sum(d.d2h_s for d in j.rows) / max(1, len(j.rows)) / max(1, len(j.b.step_names))
    return Cause("copy-bound", m.share(m.copy_s),
                 f"copy-bound: host-to-device / device-to-host copies take "
                 f"{pct(m.share(m.copy_s))} of the step with no kernel running "
                 f"({ms(m.copy_s)} of {ms(m.period_s)}; copies per step: H2D {ms(h2d)}, "
                 f"D2H {ms(d2h)}); tf.data is not waited for ({pct(m.share(m.input_s))})"
                 f"{near_words(a)}",
                 "move less data, and overlap it: keep the data on the GPU where it fits "
                 "(load it once as a tensor, not a NumPy array fed each step), prefetch to "
                 "the device (tf.data.experimental.prefetch_to_device('/gpu:0') at the "
                 "pipeline's end, or strategy.experimental_distribute_dataset), send "
                 "compact dtypes (uint8 images) and cast on the GPU; TensorFlow copies "
                 "from pinned host memory when the input is a tf.data pipeline",
                 {"h2d_s_per_step": h2d, "d2h_s_per_step": d2h, "against": a.to_dict()},
                 (Action("keep the data on the GPU, or prefetch to it: "
                         "tf.data.experimental.prefetch_to_device('/gpu:0')"),))


def _host(j: Judged) -> Cause | None:
    m = j.m
    a = j.against(lambda s: s.host_between_calls_s, HOST_BOUND)
    if a.side == stats.BELOW:
        return None
    where, line = "", None
    if j.facts.called_at:
        at = j.facts.called_at
        line = f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}"
        where = f" (the loop at {line})"
    gpu = " while the GPU waits" if j.gpu else ""
    what = ("the host after the step call returned, before the step's last work on the "
            "device (the program's Python around the call: the loop, logging, a Keras "
            "fit's per-batch callbacks)" if j.b.steps_from == "device Steps line" else
            "the program's Python between the step calls")
    return Cause("host-bound", m.share(m.host_between_calls_s),
                 f"host-bound: {pct(m.share(m.host_between_calls_s))} of the step "
                 f"({ms(m.host_between_calls_s)} of {ms(m.period_s)}) is {what}{gpu}"
                 f"{near_words(a)}",
                 f"move the per-step Python work between the calls of "
                 f"{j.facts.loop or 'the step'}{where} into the tf.function, or do it every "
                 "N steps (logging, metrics, .numpy() calls)" + (
                     "" if j.facts.loop else f"; Keras: {STEPS_PER_EXECUTION} (fit's "
                     "per-batch callbacks then run once per N steps)"),
                 {"against": a.to_dict()},
                 (Action(f"move the per-step Python work between the calls of "
                         f"{j.facts.loop or 'the step'} into the tf.function, or do it every "
                         "N steps", line),))


def _launch_text(j: Judged) -> str:
    stats = j.kernels()
    if not stats:
        return ""
    n = sum(s.kernels_per_step for s in stats) / len(stats)
    med = sum(s.median_kernel_s for s in stats) / len(stats)
    mean = sum(s.mean_kernel_s for s in stats) / len(stats)
    gap = sum(s.mean_gap_s for s in stats) / len(stats)
    return (f": {n:.0f} kernels per step, median {us(med)}, mean {us(mean)}, "
            f"{us(gap)} between kernels on average; the GPU runs kernels "
            f"{pct(j.m.share(j.m.compute_s))} of the step")


def _launch(j: Judged) -> Cause | None:
    m = j.m
    launch = m.launch_s
    a = j.against(lambda s: s.launch_s, LAUNCH_BOUND if j.gpu else OVERHEAD_BOUND)
    if j.gpu and a.side != stats.BELOW:
        return Cause("launch-bound", m.share(launch),
                     f"launch-bound: inside the step the GPU waits {pct(m.share(launch))} of "
                     f"the step ({ms(launch)} of {ms(m.period_s)}) for the host to launch "
                     f"work{_launch_text(j)}; tf.data is not waited for "
                     f"({pct(m.share(m.input_s))}){near_words(a)}",
                     "fewer, larger kernels: a larger batch; XLA (jit_compile=True in "
                     "compile() or tf.function) fuses the small ops; "
                     f"{_more_steps(j.facts.loop)}", {"against": a.to_dict()},
                     (Action("XLA: jit_compile=True in compile() or on the tf.function",
                             _compile_line(j.facts.compile)),
                      Action(_more_steps_what(j.facts.loop), _loop_line(j.facts))))
    if not j.gpu and a.side != stats.BELOW:
        text = (f"overhead-bound: in {pct(m.share(launch))} of the step ({ms(launch)} of "
                f"{ms(m.period_s)}) no op ran inside the step call: TensorFlow's own "
                "per-step work (calling the step function, scheduling its ops) "
                f"outweighs ops this small{near_words(a)}")
        n = _in_place(j.facts.compile) if j.facts.loop and "fit" in j.facts.loop else None
        if n is not None:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; the program already runs {n} steps per execution (compile"
                f"{_compile_at(j.facts.compile)}): what is left is each step's own op "
                "scheduling inside the execution, which more steps per execution do not "
                "remove"), "a larger batch (more work per op), or XLA (jit_compile=True in "
                f"compile{_compile_at(j.facts.compile)}) to fuse the small ops; "
                f"steps_per_execution beyond {n} saves only the per-call part",
                {"steps_per_execution": n, "against": a.to_dict()},
                (Action("XLA: jit_compile=True in compile()", _compile_line(j.facts.compile)),))
        k = j.b.updates_per_call
        if k is not None and k >= LARGE_STEPS_PER_EXECUTION:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; each call of {j.facts.loop or 'the step function'} already runs {k:.0f} "
                "training steps (a loop inside the tf.function): what is left is each "
                "step's own op scheduling, which more steps a call do not remove"),
                "a larger batch (more work per op), or XLA (jit_compile=True on the "
                "tf.function) to fuse the small ops",
                {"steps_per_call": k, "against": a.to_dict()},
                (Action("XLA: jit_compile=True on the tf.function"),))
        return Cause("overhead-bound", m.share(launch), text,
                     f"more work per step call: {_more_steps(j.facts.loop, j.facts.compile)}; "
                     "or a larger batch", {"against": a.to_dict()},
                     (Action(_more_steps_what(j.facts.loop), _loop_line(j.facts)),))
    return _xla_loop(j)


def _xla_loop(j: Judged) -> Cause | None:
    """An XLA-compiled step called from a Python loop, its compiled work under half the
    step and its input not waited for: the rest is paid once a call (the Python loop,
    next(), entering the function), so more steps a call is the fix, in an outer
    tf.function (IteratorGetNext has no XLA kernel: a loop over the iterator inside the
    jit_compile function fails to compile, checked with the installed TensorFlow)."""
    m = j.m
    if not j.facts.jit_compile or not j.facts.loop or "fit" in j.facts.loop:
        return None
    around = 1 - m.share(m.compute_s)
    share, _, near = input_share(j.facts, m)
    if around < OVERHEAD_BOUND or share >= INPUT_BOUND or near:
        return None  # the compiled work, or the input (its own cause), is the step
    floor = floor_note(j.facts)
    step = j.facts.loop.split()[-1]
    return Cause(
        "overhead-bound", around,
        f"overhead-bound: the XLA-compiled step's ops run {pct(m.share(m.compute_s))} of "
        f"the step ({ms(m.compute_s)} of {ms(m.period_s)}); the other {pct(around)} is paid "
        "once a call: the Python loop around it, next(iterator) and entering the compiled "
        "function" + (f" ({floor})" if floor else ""),
        "more steps per Python call: an outer tf.function without jit_compile that runs N "
        f"steps, `for _ in tf.range(N): {step}(*next(iterator))`, "
        "around the XLA-compiled step (the iterator's ops do not compile with XLA, so the "
        "loop goes outside it); prefetch does not help a step that does not wait for its "
        "input",
        {"jit_compile": True, "around_share": around},
        (Action(f"call {step} N times a Python call: an outer tf.function (no jit_compile) "
                f"looping `for _ in tf.range(N): {step}(*next(iterator))`",
                _loop_line(j.facts)),))


def _compile_line(compiled: dict[str, Any] | None) -> str | None:
    at = (compiled or {}).get("caller")
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}" if at else None


def _loop_line(facts: ProgramFacts) -> str | None:
    """The line that changes to run more steps a call: a fit's compile, else where the
    step function is called."""
    if facts.loop and "fit" in facts.loop:
        return _compile_line(facts.compile)
    at = facts.called_at
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at['line']}" if at else None


def _more_steps_what(loop: str | None) -> str:
    if loop and "fit" in loop:
        return "pass steps_per_execution=N to compile()"
    return f"run several steps in each call of {loop or 'the step function'}"



LARGE_STEPS_PER_EXECUTION = 8  # from here steps_per_execution is in place, not advised


def _compile_at(compiled: dict[str, Any] | None) -> str:
    at = (compiled or {}).get("caller")
    if not at:
        return ""
    code = f" (`{at['code']}`)" if at.get("code") else ""
    return f" at {str(at['file']).rsplit('/', 1)[-1]}:{at['line']}{code}"


def _more_steps(loop: str | None, compiled: dict[str, Any] | None = None) -> str:
    loop_fix = (f"run several steps in each call of {loop or 'the step function'} (a loop "
                "over the iterator inside the tf.function)")
    if loop and "fit" in loop:
        return STEPS_PER_EXECUTION + _compile_at(compiled)
    return loop_fix if loop else f"Keras: {STEPS_PER_EXECUTION}; a custom loop: {loop_fix}"


def _in_place(compiled: dict[str, Any] | None) -> int | None:
    """The program's steps_per_execution when it is already large (None: not in place)."""
    n = (compiled or {}).get("steps_per_execution")
    return n if isinstance(n, int) and n >= LARGE_STEPS_PER_EXECUTION else None


def _gpu_bound(j: Judged) -> Cause | None:
    m = j.m
    a = j.against(lambda s: s.compute_s, GPU_BOUND)
    if not j.gpu or a.side == stats.BELOW:
        return None
    kstats = j.kernels()
    steps = max(1, len(j.b.step_names))
    tops = kstats[0].top_kernels[:3] if kstats else []
    ops = kstats[0].top_ops[:3] if kstats else []
    half = sum(s.half_share for s in kstats) / len(kstats) if kstats else None
    tensor = sum(s.tensor_core_share for s in kstats) / len(kstats) if kstats else None
    text = (f"GPU-bound: the GPU runs kernels {pct(m.share(m.compute_s))} of the step "
            f"({ms(m.compute_s)} of {ms(m.period_s)}); input {pct(m.share(m.input_s))}, "
            f"copies {pct(m.share(m.copy_s))}{near_words(a)}")
    if ops:
        text += "; top ops: " + ", ".join(f"{o.name} {ms(o.total_s / steps)}" for o in ops)
    if tops:
        text += "; top kernels: " + ", ".join(f"{short_kernel(k.name)} {ms(k.total_s / steps)}"
                                               for k in tops)
    fixes = []
    if half is not None and tensor is not None:
        text += (f"; float16/bfloat16 kernels {pct(half)} of kernel time, Tensor Core "
                 f"kernels {pct(tensor)}")
        if half < HALF_ADVISED:
            fixes.append("mixed precision (keras.mixed_precision.set_global_policy("
                         "'mixed_float16'), or 'mixed_bfloat16'): under 10 % of the kernel "
                         "time is float16/bfloat16, so the Tensor Cores sit idle")
        elif tensor < half / 2:
            fixes.append("Tensor Cores take float16 matrices whose dimensions are multiples "
                         "of 8: pad units, filters and the batch to multiples of 8")
    fixes += ["XLA (jit_compile=True) fuses element-wise kernels and saves memory traffic",
              "a larger batch where the GPU's memory allows (more work per kernel)",
              "past that, a faster or another GPU (the program keeps this one busy)"]
    actions = ([Action("mixed precision: keras.mixed_precision.set_global_policy("
                       "'mixed_float16')")] if half is not None and half < HALF_ADVISED
               else []) + [Action("XLA: jit_compile=True"), Action("a larger batch")]
    return Cause("gpu-bound", m.share(m.compute_s), text, "; ".join(fixes),
                 {"half_share": half, "tensor_core_share": tensor,
                  "top_kernels": [(short_kernel(k.name), k.total_s / steps) for k in tops],
                  "top_ops": [(o.name, o.total_s / steps) for o in ops],
                  "against": a.to_dict()}, tuple(actions))


def _communication(j: Judged) -> Cause | None:
    m = j.m
    a = j.against(lambda s: s.communication_s, COMM_BOUND)
    if a.side == stats.BELOW:
        return None
    return Cause("communication-bound", m.share(m.communication_s),
                 f"communication-bound: collectives (all-reduce) take "
                 f"{pct(m.share(m.communication_s))} of the step ({ms(m.communication_s)} of "
                 f"{ms(m.period_s)}){near_words(a)}",
                 "fewer, larger all-reduces: a larger batch per replica, or fewer replicas "
                 "for a model this size", {"against": a.to_dict()},
                 (Action("a larger batch per replica"),))


def _straggler(j: Judged) -> Cause | None:
    skew, period = j.b.replica_skew_s, j.m.period_s
    if skew is None or period <= 0 or skew / period < SKEW_BOUND:
        return None
    ratio = skew / period
    return Cause("straggler", ratio,
                 f"a straggler: one replica started a step {ms(skew)} after another ("
                 + (f"{ratio:.1f} x" if ratio >= 1 else f"{pct(ratio)} of") + " a step)",
                 "the replicas do not start together: look for per-replica input or host "
                 "work in the Profile tab's trace viewer")


def _idle_gpus(j: Judged) -> Cause | None:
    b = j.b
    gpus = [d for d in b.devices if d.source == "device-plane"]
    if not b.gpus_without_kernels or len(b.gpus_without_kernels) >= len(gpus):
        return None
    idle = len(b.gpus_without_kernels)
    return Cause("idle-gpus", idle / len(gpus),
                 f"{idle} of the {len(gpus)} GPUs ran no kernel in the window "
                 f"({', '.join(b.gpus_without_kernels)})",
                 "a strategy over every GPU gives each a replica that runs kernels every "
                 "step: check the devices the program gives its strategy (MirroredStrategy() "
                 "with no list takes every visible GPU) and CUDA_VISIBLE_DEVICES", {},
                 (Action("give the strategy every GPU: MirroredStrategy() with no device "
                         "list"),))


CAUSES: tuple[Callable[[Judged], Cause | None], ...] = (
    _input, _copy, _host, _communication, _launch, _gpu_bound, _straggler, _idle_gpus)


def small_kernels(fills: Sequence[gpu_fill.Fill]) -> list[Cause]:
    """NVML busy while GPM's SMs mostly idle (Hopper and later): a cause of its own."""
    return [Cause("small-kernels", 1 - f.sm_util_mean_percent / f.util_mean_percent,
                  f.text(), gpu_fill.ADVICE, {},
                  (Action("more work per kernel: a larger batch, or XLA (jit_compile=True)"),))
            for f in fills if f.sm_util_mean_percent is not None and f.util_mean_percent]


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


def order(c: Cause) -> tuple[bool, bool, bool, float]:
    """The causes' order: those clear over their threshold, then those near it whose
    measured share is over it, then those near it whose share is under it (a share whose
    interval crosses its line never outranks one clear of it, nor one on the far side of
    its own: the named cause stays the same from run to run; measured under a load of 8 on
    2 cores, a window of 4 steps put both input-bound, 17 % against 20 %, and overhead-bound,
    75 % against 50 %, near); overhead-bound after the others (what is left when nothing
    else explains the step); then the largest share first."""
    a = c.evidence.get("against") or {}
    near = a.get("side") == stats.NEAR
    under = near and float(a.get("value", 0.0)) < float(a.get("threshold", 0.0))
    return under, near, c.name == "overhead-bound", -c.share


def advice(found: Sequence[Cause]) -> str:
    """Each cause's fix once, in the causes' order."""
    out: list[str] = []
    for c in found:
        if c.advice and c.advice not in out:
            out.append(c.advice)
    return "; ".join(out)
