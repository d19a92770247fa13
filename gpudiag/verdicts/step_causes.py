"""The causes of a slow step, each written once with its fix: what the trace shows (the
text) and what to change (the advice) are made together, by one function per cause. This
module holds their records, thresholds and order, and the device's family (copy-, GPU- and
communication-bound, a straggler, idle GPUs, small kernels); input_causes.py the input's,
call_causes.py the step call's (host-, launch- and overhead-bound).

Pure: a mean step (gpudiag.readers.steprecords.StepParts), the trace's Breakdown, the
devices judged and what the program did (ProgramFacts) in; Cause records out. The finding
around them, and the list of causes judged, is gpudiag.verdicts.bottleneck's.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gpudiag.layout.events import DatasetCall
from gpudiag.layout.units import duration
from gpudiag.layout.units import share as pct
from gpudiag.readers.gpukernels import KernelStats
from gpudiag.readers.steprecords import Breakdown, DeviceBreakdown, StepParts
from gpudiag.report import Action
from gpudiag.verdicts import gpu_fill, stats

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
    # with its "fix" and "action" (gpudiag.verdicts.bottleneck.eager, eager_where)
    jit_compile: bool = False  # the step tf.function is XLA-compiled (jit_compile=True)
    # a Keras fit's steady-state step periods over the whole run (start to start, the
    # profiled steps left out), where its input wait is inside its graph (no input_series):
    # what the window is held to (window_missed)
    run_periods: Sequence[float] = ()
    window_input: dict[str, Any] | None = None  # window_missed's, set by the bottleneck verdict
    # the cores the program kept busy in the steps after its window (observation's
    # cpu_use: busy_cores, cores, steps): what a parallel map's threads would share
    cpu_use: dict[str, Any] | None = None


WRAP = "wrap the step in tf.function (@tf.function)"  # an eager loop's fix, in words


def eager_where(eager: dict[str, Any] | None) -> str | None:
    """Where an eager loop's fix goes (hostcauses.eager_facts): the line that switched
    tf.functions to run eagerly, else its step's def line where the step is a function,
    else the line of its tape.gradient."""
    eager = eager or {}
    if eager.get("run_eagerly_at"):
        return str(eager["run_eagerly_at"])
    at = eager.get("at") or {}
    line = eager.get("def_line") or at.get("line")
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{line}" if at.get("file") and line else None


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


def copy_bound(j: Judged) -> Cause | None:
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


def gpu_bound(j: Judged) -> Cause | None:
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


def communication_bound(j: Judged) -> Cause | None:
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


def straggler(j: Judged) -> Cause | None:
    skew, period = j.b.replica_skew_s, j.m.period_s
    if skew is None or period <= 0 or skew / period < SKEW_BOUND:
        return None
    ratio = skew / period
    return Cause("straggler", ratio,
                 f"a straggler: one replica started a step {ms(skew)} after another ("
                 + (f"{ratio:.1f} x" if ratio >= 1 else f"{pct(ratio)} of") + " a step)",
                 "the replicas do not start together: look for per-replica input or host "
                 "work in the Profile tab's trace viewer")


def idle_gpus(j: Judged) -> Cause | None:
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


def small_kernels(fills: Sequence[gpu_fill.Fill]) -> list[Cause]:
    """NVML busy while GPM's SMs mostly idle (Hopper and later): a cause of its own."""
    return [Cause("small-kernels", 1 - f.sm_util_mean_percent / f.util_mean_percent,
                  f.text(), gpu_fill.ADVICE, {},
                  (Action("more work per kernel: a larger batch, or XLA (jit_compile=True)"),))
            for f in fills if f.sm_util_mean_percent is not None and f.util_mean_percent]


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
