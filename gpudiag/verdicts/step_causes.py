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
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudiag.readers.gpukernels import KernelStats
from gpudiag.readers.stepbreakdown import Breakdown, DeviceBreakdown, StepParts
from gpudiag.records.run import DatasetCall
from gpudiag.verdicts import gpu_fill
from gpudiag.verdicts.pipeline import parallel_and_prefetched, pipeline_fixes, stage_fixes

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


@dataclass(frozen=True)
class Cause:
    name: str  # input-bound | copy-bound | host-bound | launch-bound | gpu-bound |
    #            communication-bound | overhead-bound | straggler | idle-gpus | small-kernels
    share: float  # of the step
    text: str  # what the trace shows, with its numbers
    advice: str  # the fix for this cause
    evidence: dict[str, Any] = field(default_factory=dict)


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


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


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


def input_share(facts: ProgramFacts, m: StepParts) -> tuple[float, str, bool]:
    """The input share that decides, what it is read from, and whether its spread holds
    xprof's input-bound threshold (then the verdict says so instead of flipping). Over the
    whole run, when next()'s own cost on a full buffer was measured, only the wait beyond
    it is input waited for (prefetch cannot hide the rest)."""
    w = facts.input_series
    if w is None:
        return m.share(m.input_s), "", False
    d = w.get("hidden") or w
    spread = (f", {d['low']:.0%}-{d['high']:.0%} over blocks of steps"
              if d.get("low") is not None else "")
    near = d.get("low") is not None and d["low"] < INPUT_BOUND <= d["high"]
    floor = ""
    if w.get("hidden") is not None:
        floor = (f", {w['share']:.0%} with next()'s own {ms(w['floor']['floor_s'])} a call "
                 "on a full buffer (measured), which prefetch cannot hide")
    return d["share"], (f" over the whole run ({w['steps']} steps, the program's "
                        f"next(iterator) {ms(w['wait_s_per_step'])} a step{spread}{floor}; "
                        f"the profiled window: {m.share(m.input_s):.0%})"), near


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
    return (f"next(iterator) takes {ms(w['wait_s_median'])} a call (median; {own:.0%} of "
            f"the step) though its batch is ready: its own cost on a full buffer, "
            f"{ms(w['floor']['floor_s'])} measured, which prefetch cannot hide")


def _input(j: Judged) -> Cause | None:
    m = j.m
    share, source, near = input_share(j.facts, m)
    if share < INPUT_BOUND and not near:
        return None
    calls = j.facts.calls
    fixes = pipeline_fixes(calls, j.facts.epochs)
    out = []
    top = j.b.xprof.input_ops[0] if j.b.xprof and j.b.xprof.input_ops else None
    if top is not None:
        out.append(f"tf.data's time goes to {top.name} ({top.self_share:.0%} of the "
                   "input pipeline, xprof)")
    out += fixes
    if parallel_and_prefetched(calls):
        out.append("the program's pipeline already maps in parallel and prefetches: the "
                   "per-element work itself outruns the step; vectorise it (batch before "
                   "the map, with a function written for a batch: one call maps the whole "
                   "batch), cache() after the map when the data fits in memory, make the "
                   "per-element ops fewer or cheaper, or preprocess offline")
    elif not any(x.caller and x.caller.get("direct") for x in calls):
        out += stage_fixes(j.b.xprof.input_ops if j.b.xprof else [])
        out.append("the program's tf.data calls were not recorded: see the input pipeline "
                   "in TensorBoard's Profile tab")
    if source:
        text = (f"{share:.0%} of the step waits for input{source}" + (
            f": within its spread of xprof's {INPUT_BOUND:.0%} threshold, input-bound or "
            "close to it" if near else ""))
        return Cause("input-bound", share, f"input-bound: {text}", "; ".join(out),
                     {"input_series": j.facts.input_series, "near_threshold": near})
    return Cause("input-bound", m.share(m.input_s),
                 f"input-bound: {m.share(m.input_s):.0%} of the step ({ms(m.input_s)} of "
                 f"{ms(m.period_s)}) waits for input", "; ".join(out))


def _copy(j: Judged) -> Cause | None:
    m = j.m
    if not j.gpu or m.share(m.copy_s) < COPY_BOUND:
        return None
    h2d = sum(d.h2d_s for d in j.rows) / max(1, len(j.rows)) / max(1, len(j.b.step_names))
    d2h = sum(d.d2h_s for d in j.rows) / max(1, len(j.rows)) / max(1, len(j.b.step_names))
    return Cause("copy-bound", m.share(m.copy_s),
                 f"copy-bound: host-to-device / device-to-host copies take "
                 f"{m.share(m.copy_s):.0%} of the step with no kernel running "
                 f"({ms(m.copy_s)} of {ms(m.period_s)}; copies per step: H2D {ms(h2d)}, "
                 f"D2H {ms(d2h)}); tf.data is not waited for ({m.share(m.input_s):.0%})",
                 "move less data, and overlap it: keep the data on the GPU where it fits "
                 "(load it once as a tensor, not a NumPy array fed each step), prefetch to "
                 "the device (tf.data.experimental.prefetch_to_device('/gpu:0') at the "
                 "pipeline's end, or strategy.experimental_distribute_dataset), send "
                 "compact dtypes (uint8 images) and cast on the GPU; TensorFlow copies "
                 "from pinned host memory when the input is a tf.data pipeline",
                 {"h2d_s_per_step": h2d, "d2h_s_per_step": d2h})


def _host(j: Judged) -> Cause | None:
    m = j.m
    if m.share(m.host_between_calls_s) < HOST_BOUND:
        return None
    where = ""
    if j.facts.called_at:
        at = j.facts.called_at
        where = f" (the loop at {str(at['file']).rsplit('/', 1)[-1]}:{at['line']})"
    gpu = " while the GPU waits" if j.gpu else ""
    what = ("the host after the step call returned, before the step's last work on the "
            "device (the program's Python around the call: the loop, logging, a Keras "
            "fit's per-batch callbacks)" if j.b.steps_from == "device Steps line" else
            "the program's Python between the step calls")
    return Cause("host-bound", m.share(m.host_between_calls_s),
                 f"host-bound: {m.share(m.host_between_calls_s):.0%} of the step "
                 f"({ms(m.host_between_calls_s)} of {ms(m.period_s)}) is {what}{gpu}",
                 f"move the per-step Python work between the calls of "
                 f"{j.facts.loop or 'the step'}{where} into the tf.function, or do it every "
                 "N steps (logging, metrics, .numpy() calls)" + (
                     "" if j.facts.loop else f"; Keras: {STEPS_PER_EXECUTION} (fit's "
                     "per-batch callbacks then run once per N steps)"))


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
            f"{j.m.share(j.m.compute_s):.0%} of the step")


def _launch(j: Judged) -> Cause | None:
    m = j.m
    launch = m.launch_s
    if j.gpu and m.share(launch) >= LAUNCH_BOUND:
        return Cause("launch-bound", m.share(launch),
                     f"launch-bound: inside the step the GPU waits {m.share(launch):.0%} of "
                     f"the step ({ms(launch)} of {ms(m.period_s)}) for the host to launch "
                     f"work{_launch_text(j)}; tf.data is not waited for "
                     f"({m.share(m.input_s):.0%})",
                     "fewer, larger kernels: a larger batch; XLA (jit_compile=True in "
                     "compile() or tf.function) fuses the small ops; "
                     f"{_more_steps(j.facts.loop)}")
    if not j.gpu and m.share(launch) >= OVERHEAD_BOUND:
        text = (f"overhead-bound: in {m.share(launch):.0%} of the step ({ms(launch)} of "
                f"{ms(m.period_s)}) no op ran inside the step call: TensorFlow's own "
                "per-step work (calling the step function, scheduling its ops) "
                "outweighs ops this small")
        n = _in_place(j.facts.compile) if j.facts.loop and "fit" in j.facts.loop else None
        if n is not None:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; the program already runs {n} steps per execution (compile"
                f"{_compile_at(j.facts.compile)}): what is left is each step's own op "
                "scheduling inside the execution, which more steps per execution do not "
                "remove"), "a larger batch (more work per op), or XLA (jit_compile=True in "
                f"compile{_compile_at(j.facts.compile)}) to fuse the small ops; "
                f"steps_per_execution beyond {n} saves only the per-call part",
                {"steps_per_execution": n})
        k = j.b.updates_per_call
        if k is not None and k >= LARGE_STEPS_PER_EXECUTION:
            return Cause("overhead-bound", m.share(launch), text + (
                f"; each call of {j.facts.loop or 'the step function'} already runs {k:.0f} "
                "training steps (a loop inside the tf.function): what is left is each "
                "step's own op scheduling, which more steps a call do not remove"),
                "a larger batch (more work per op), or XLA (jit_compile=True on the "
                "tf.function) to fuse the small ops",
                {"steps_per_call": k})
        return Cause("overhead-bound", m.share(launch), text,
                     f"more work per step call: {_more_steps(j.facts.loop, j.facts.compile)}; "
                     "or a larger batch")
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
    return Cause(
        "overhead-bound", around,
        f"overhead-bound: the XLA-compiled step's ops run {m.share(m.compute_s):.0%} of "
        f"the step ({ms(m.compute_s)} of {ms(m.period_s)}); the other {around:.0%} is paid "
        "once a call: the Python loop around it, next(iterator) and entering the compiled "
        "function" + (f" ({floor})" if floor else ""),
        "more steps per Python call: an outer tf.function without jit_compile that runs N "
        f"steps, `for _ in tf.range(N): {j.facts.loop.split()[-1]}(*next(iterator))`, "
        "around the XLA-compiled step (the iterator's ops do not compile with XLA, so the "
        "loop goes outside it); prefetch does not help a step that does not wait for its "
        "input",
        {"jit_compile": True, "around_share": around})



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
    if not j.gpu or m.share(m.compute_s) < GPU_BOUND:
        return None
    stats = j.kernels()
    steps = max(1, len(j.b.step_names))
    tops = stats[0].top_kernels[:3] if stats else []
    ops = stats[0].top_ops[:3] if stats else []
    half = sum(s.half_share for s in stats) / len(stats) if stats else None
    tensor = sum(s.tensor_core_share for s in stats) / len(stats) if stats else None
    text = (f"GPU-bound: the GPU runs kernels {m.share(m.compute_s):.0%} of the step "
            f"({ms(m.compute_s)} of {ms(m.period_s)}); input {m.share(m.input_s):.0%}, "
            f"copies {m.share(m.copy_s):.0%}")
    if ops:
        text += "; top ops: " + ", ".join(f"{o.name} {ms(o.total_s / steps)}" for o in ops)
    if tops:
        text += "; top kernels: " + ", ".join(f"{short_kernel(k.name)} {ms(k.total_s / steps)}"
                                               for k in tops)
    fixes = []
    if half is not None and tensor is not None:
        text += (f"; float16/bfloat16 kernels {half:.0%} of kernel time, Tensor Core "
                 f"kernels {tensor:.0%}")
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
    return Cause("gpu-bound", m.share(m.compute_s), text, "; ".join(fixes),
                 {"half_share": half, "tensor_core_share": tensor,
                  "top_kernels": [(short_kernel(k.name), k.total_s / steps) for k in tops],
                  "top_ops": [(o.name, o.total_s / steps) for o in ops]})


def _communication(j: Judged) -> Cause | None:
    m = j.m
    if m.share(m.communication_s) < COMM_BOUND:
        return None
    return Cause("communication-bound", m.share(m.communication_s),
                 f"communication-bound: collectives (all-reduce) take "
                 f"{m.share(m.communication_s):.0%} of the step ({ms(m.communication_s)} of "
                 f"{ms(m.period_s)})",
                 "fewer, larger all-reduces: a larger batch per replica, or fewer replicas "
                 "for a model this size")


def _straggler(j: Judged) -> Cause | None:
    skew, period = j.b.replica_skew_s, j.m.period_s
    if skew is None or period <= 0 or skew / period < SKEW_BOUND:
        return None
    ratio = skew / period
    return Cause("straggler", ratio,
                 f"a straggler: one replica started a step {ms(skew)} after another ("
                 + (f"{ratio:.1f} x" if ratio >= 1 else f"{ratio:.0%} of") + " a step)",
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
                 "with no list takes every visible GPU) and CUDA_VISIBLE_DEVICES")


CAUSES: tuple[Callable[[Judged], Cause | None], ...] = (
    _input, _copy, _host, _communication, _launch, _gpu_bound, _straggler, _idle_gpus)


def small_kernels(fills: Sequence[gpu_fill.Fill]) -> list[Cause]:
    """NVML busy while GPM's SMs mostly idle (Hopper and later): a cause of its own."""
    return [Cause("small-kernels", 1 - f.sm_util_mean_percent / f.util_mean_percent,
                  f.text(), gpu_fill.ADVICE)
            for f in fills if f.sm_util_mean_percent is not None and f.util_mean_percent]


def causes(j: Judged) -> list[Cause]:
    """Every cause above its threshold, the largest first; overhead-bound last (it is
    what is left when nothing else explains the step). The step series' causes
    (retracing, callbacks: time inside the step with no op running) take their share
    off overhead-bound's (a callback: its typical batch's share, ``window_share``), which
    stays only when what is left is still over its threshold."""
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
    return sorted([*found, *host], key=lambda c: (c.name == "overhead-bound", -c.share))


def advice(found: Sequence[Cause]) -> str:
    """Each cause's fix once, in the causes' order."""
    out: list[str] = []
    for c in found:
        if c.advice and c.advice not in out:
            out.append(c.advice)
    return "; ".join(out)
