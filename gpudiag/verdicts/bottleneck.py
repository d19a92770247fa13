"""Why is it slow: the dominant cause of a step's time, with its numbers, and the fix at the
program's own line where the evidence has it.

Pure: gpudiag.readers.stepbreakdown.Breakdown (the profiled window's trace), the tf.data calls the
program made (gpudiag.records.run.DatasetCall) and the step loop's facts in; a Finding out.

Thresholds: waiting for input >= 20 % of the step is input-bound, 5-20 % moderately
(xprof's own, in its input-pipeline analysis). gpudiag's own, at the same 20 %: the
program's Python between the step calls (host-bound), collective communication
(communication-bound), host launching while the device waits (launch-bound, GPU), and one
replica starting a step after another (a straggler); on the CPU, at 50 %, the step call's
time with no op running (overhead-bound: TensorFlow's per-step work outweighs the ops).
On a GPU with GPM (Hopper and later), a GPU NVML calls busy whose SMs mostly idle
(gpudiag.verdicts.gpu_fill) is a cause too: a few small kernels.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.readers.stepbreakdown import HOST_ROW, Breakdown, DeviceBreakdown, StepParts
from gpudiag.records.run import DatasetCall
from gpudiag.report import Finding
from gpudiag.verdicts import allreduce, gpu_fill, whatif

INPUT_BOUND = 0.20  # xprof: "HIGHLY input-bound"
INPUT_MODERATE = 0.05  # xprof: "MODERATELY input-bound" from here
HOST_BOUND = 0.20
COMM_BOUND = 0.20
LAUNCH_BOUND = 0.20
# On the CPU: most of the step inside the step call with no op running is TensorFlow's own
# per-step work (the call, the executor) outweighing ops too small to amortize it.
OVERHEAD_BOUND = 0.50
SKEW_BOUND = 0.20
MAX_CHAIN = 200  # calls followed back from a pipeline's end


@dataclass(frozen=True)
class Cause:
    name: str  # input-bound | host-bound | communication-bound | launch-bound |
    #            overhead-bound | straggler | idle-gpus | small-kernels
    #            | idle-gpus | small-kernels
    share: float  # of the step
    text: str


def working(b: Breakdown, replicas: Sequence[str] = ()) -> list[DeviceBreakdown]:
    """The devices whose steps are judged: the strategy's replicas where the trace has
    them, else those that ran kernels or ops (the row of ops the placement does not name
    only when there is no other)."""
    mine = [d for d in b.devices if d.steps and any(d.device.endswith(r) for r in replicas)]
    placed = [d for d in b.devices if d.device != HOST_ROW]  # HOST_ROW: ops placed nowhere
    rows = mine or [d for d in placed if d.steps and d.ran_kernels]
    return rows or [d for d in placed if d.steps] or [d for d in b.devices if d.steps]


def mean_parts(rows: Sequence[DeviceBreakdown]) -> StepParts | None:
    means = [m for m in (d.mean() for d in rows) if m is not None]
    if not means:
        return None
    n = len(means)

    def avg(name: str) -> float:
        return sum(getattr(m, name) for m in means) / n
    return StepParts("mean", avg("period_s"), avg("compute_s"), avg("communication_s"),
                     avg("input_s"), avg("host_s"), avg("idle_s"), avg("host_between_calls_s"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def parts_text(m: StepParts) -> str:
    text = (f"compute {m.share(m.compute_s):.0%}, input {m.share(m.input_s):.0%}, "
            f"communication {m.share(m.communication_s):.0%}, host {m.share(m.host_s):.0%}")
    if m.host_between_calls_s > 0:
        text += f" (Python between step calls {m.share(m.host_between_calls_s):.0%})"
    return text + f", idle {m.share(m.idle_s):.0%}"


PARTS = ("compute", "communication", "input", "host", "idle")  # in the order they add up


def parts_seconds(m: StepParts) -> dict[str, float]:
    """A mean step's parts in seconds, the evidence's plain form (the picture's bars)."""
    return {"period_s": m.period_s, **{f"{k}_s": getattr(m, f"{k}_s") for k in PARTS},
            "host_between_calls_s": m.host_between_calls_s}


def causes(b: Breakdown, m: StepParts, gpu: bool) -> list[Cause]:
    """Every cause above its threshold, the largest first."""
    found = []
    if m.share(m.input_s) >= INPUT_BOUND:
        found.append(Cause("input-bound", m.share(m.input_s),
                           f"input-bound: {m.share(m.input_s):.0%} of the step "
                           f"({_ms(m.input_s)} of {_ms(m.period_s)}) waits for input"))
    if m.share(m.host_between_calls_s) >= HOST_BOUND:
        found.append(Cause("host-bound", m.share(m.host_between_calls_s),
                           f"host-bound: {m.share(m.host_between_calls_s):.0%} of the step "
                           f"({_ms(m.host_between_calls_s)} of {_ms(m.period_s)}) is the "
                           "program's Python between the step calls"))
    if m.share(m.communication_s) >= COMM_BOUND:
        found.append(Cause("communication-bound", m.share(m.communication_s),
                           f"communication-bound: collectives (all-reduce) take "
                           f"{m.share(m.communication_s):.0%} of the step "
                           f"({_ms(m.communication_s)} of {_ms(m.period_s)})"))
    launch = m.host_s - m.host_between_calls_s
    if gpu and m.share(launch) >= LAUNCH_BOUND:
        found.append(Cause("launch-bound", m.share(launch),
                           f"launch-bound: the GPU waits {m.share(launch):.0%} of the step "
                           "while the host launches ops"))
    elif not gpu and m.share(launch) >= OVERHEAD_BOUND:
        found.append(Cause("overhead-bound", m.share(launch),
                           f"overhead-bound: in {m.share(launch):.0%} of the step "
                           f"({_ms(launch)} of {_ms(m.period_s)}) no op ran inside the step "
                           "call: TensorFlow's own per-step work (calling the step function, "
                           "scheduling its ops) outweighs ops this small"))
    if b.replica_skew_s is not None and m.period_s > 0 and \
            b.replica_skew_s / m.period_s >= SKEW_BOUND:
        ratio = b.replica_skew_s / m.period_s
        found.append(Cause("straggler", ratio,
                           f"a straggler: one replica started a step {_ms(b.replica_skew_s)} "
                           f"after another (" + (f"{ratio:.1f} x" if ratio >= 1 else
                                                 f"{ratio:.0%} of") + " a step)"))
    gpus = [d for d in b.devices if d.source == "device-plane"]
    if b.gpus_without_kernels and len(b.gpus_without_kernels) < len(gpus):
        idle = len(b.gpus_without_kernels)
        found.append(Cause("idle-gpus", idle / len(gpus),
                           f"{idle} of the {len(gpus)} GPUs ran no kernel in the window "
                           f"({', '.join(b.gpus_without_kernels)})"))
    # overhead-bound is what is left when nothing else explains the step: any other cause
    # (input-bound above all, the fix the user's pipeline needs) is named first
    return sorted(found, key=lambda c: (c.name == "overhead-bound", -c.share))


def _line(c: DatasetCall) -> str:
    code = (c.caller or {}).get("code") or ""
    return f"{c.where}" + (f" (`{code[:70]}`)" if code else "")


def pipeline_fixes(calls: Sequence[DatasetCall], epochs: int | None = None) -> list[str]:
    """What the program's own tf.data calls show: a map or interleave without
    num_parallel_calls, a pipeline without prefetch, an in-memory data set mapped again
    every epoch without cache (``epochs`` > 1), Python generators and py_functions."""
    mine = [c for c in calls if c.caller and c.caller.get("direct")]
    fixes = []
    for c in mine:
        fn = (c.function or {}).get("name")
        if c.method in ("map", "interleave") and c.args.get("num_parallel_calls") is None:
            fixes.append(f"Dataset.{c.method}({fn or ''}) at {_line(c)} runs one element at a "
                         "time: pass num_parallel_calls=tf.data.AUTOTUNE")
        elif c.method == "from_generator":
            fixes.append(f"Dataset.from_generator({fn or ''}) at {_line(c)} runs Python, one "
                         "element at a time under the GIL: read the data with tf.data ops "
                         "(from_tensor_slices, TFRecordDataset) where you can")
        elif c.method in ("py_function", "numpy_function"):
            fixes.append(f"tf.{c.method}({fn or ''}) at {_line(c)} runs Python under the GIL "
                         "for every element: write it with TensorFlow ops")
    by_output = {c.output: c for c in mine if c.output}
    fed = {c.input for c in mine if c.input}
    for leaf in [c for c in mine if c.output and c.output not in fed and c.input]:
        chain: list[DatasetCall] = []
        node: DatasetCall | None = leaf
        while node is not None and len(chain) < MAX_CHAIN:
            chain.append(node)
            node = by_output.get(node.input) if node.input else None
        methods = [n.method for n in chain]
        if len(chain) > 1 and "prefetch" not in methods:
            fixes.append(f"the pipeline ending at {_line(leaf)} has no prefetch: end it with "
                         ".prefetch(tf.data.AUTOTUNE) so the next batch is made while this "
                         "one trains")
        if epochs and epochs > 1 and "map" in methods and "cache" not in methods and \
                chain[-1].method in ("from_tensor_slices", "from_tensors"):
            mapped = next(n for n in chain if n.method == "map")
            fixes.append(f"the in-memory data set is mapped again in each of the {epochs} "
                         f"epochs: .cache() after the map at {mapped.where} maps it once")
    return fixes


def bottleneck(b: Breakdown | None, reason: str | None, calls: Sequence[DatasetCall] = (),
               loop: str | None = None, called_at: dict[str, Any] | None = None,
               epochs: int | None = None, replicas: Sequence[str] = (),
               check_id: str = "run.bottleneck",
               nvml_gpus: Sequence[dict[str, Any]] | None = None,
               gradient_bytes: int | None = None) -> Finding:
    """The dominant cause of the profiled steps' time, or ok when none stands out.
    ``replicas``: the strategy's replica devices (the devices judged). ``nvml_gpus``: the
    process's GPUs as NVML sampled them (gpu_use.gpu_numbers; None: not sampled).
    ``gradient_bytes``: per replica per step, for a MirroredStrategy program (None: unknown)."""
    if b is None:
        return Finding(check_id, "skip", f"no trace of the program's steps: {reason}",
                       {"reason": reason, "predicted": whatif.nothing_measured(reason)})
    rows = working(b, replicas)
    m = mean_parts(rows)
    if m is None or m.period_s <= 0:
        return Finding(check_id, "skip", "the trace holds no complete step", {
            "path": b.path, "predicted": whatif.nothing_measured("no complete step")})
    gpu = any(d.source == "device-plane" for d in rows)
    found = causes(b, m, gpu)
    note = gpu_fill.bottleneck_note(nvml_gpus, gpu)
    found = sorted(found + [Cause("small-kernels", 1 - f.sm_util_mean_percent /
                                  f.util_mean_percent, f.text())
                            for f in note.small if f.sm_util_mean_percent is not None
                            and f.util_mean_percent],
                   key=lambda c: (c.name == "overhead-bound", -c.share))
    means = {d.device: mean for d in rows if (mean := d.mean())}
    per_device = {device: parts_text(mean) for device, mean in means.items()}
    evidence: dict[str, Any] = {
        "trace": b.path, "steps_from": b.steps_from, "steps": len(b.step_names),
        "step_s": m.period_s, "shares": {k: m.share(getattr(m, f"{k}_s")) for k in (
            "compute", "input", "communication", "host", "host_between_calls", "idle")},
        "devices": per_device, "parts_s": {d.device: parts_seconds(mean) for d in b.devices
                                           if (mean := d.mean())},  # every device
        "gpus_without_kernels": b.gpus_without_kernels,
        "replica_skew_s": b.replica_skew_s, "causes": [c.name for c in found],
        "xprof": None if b.xprof is None else {
            "conclusion": b.xprof.conclusion,
            "input_ops": [(o.name, o.self_ms) for o in b.xprof.input_ops]},
        "xprof_error": b.xprof_error,
        "thresholds": {"input_bound": INPUT_BOUND, "input_moderate": INPUT_MODERATE,
                       "host_bound": HOST_BOUND, "communication_bound": COMM_BOUND,
                       "launch_bound": LAUNCH_BOUND, "overhead_bound": OVERHEAD_BOUND,
                       "straggler": SKEW_BOUND},
        "dataset_calls": [{"method": c.method, "args": c.args, "where": c.where}
                          for c in calls if c.caller and c.caller.get("direct")],
        "gpm": note.evidence}
    reduce = allreduce.all_reduce(gradient_bytes, m.communication_s, m.period_s)
    evidence["allreduce"] = None if reduce is None else reduce.evidence()
    if reduce is not None:
        found = [Cause(c.name, c.share, f"{c.text}; {reduce.text()}")
                 if c.name == "communication-bound" else c for c in found]
    who = f"{loop}: " if loop else ""
    head = (f"{who}{_ms(m.period_s)} per step over {len(b.step_names)} profiled step(s) "
            f"({b.steps_from})")
    devices = "" if len(rows) < 2 else "; " + "; ".join(f"{d}: {t}" for d, t in
                                                         per_device.items())
    idle = f"; GPUs that ran no kernel: {', '.join(b.gpus_without_kernels)}" \
        if b.gpus_without_kernels and not any(c.name == "idle-gpus" for c in found) else ""
    idle += f"; {note.text}" if note.text else ""
    evidence["predicted"] = whatif.predict([c.name for c in found], parts_seconds(m), evidence,
                                           epochs=epochs)
    if not found:
        moderate = m.share(m.input_s) >= INPUT_MODERATE
        text = f"{head}: " + (f"moderately input-bound ({m.share(m.input_s):.0%} waits for "
                              "input); " if moderate else "no bottleneck stands out; ")
        return Finding(check_id, "ok", text + parts_text(m) + devices + idle, evidence,
                       advice="; ".join(pipeline_fixes(calls, epochs)) if moderate else "")
    top = found[0]
    text = f"{head}: {top.text}" + "".join(f"; also {c.text}" for c in found[1:]) + \
        f" ({parts_text(m)}){devices}{idle}"
    return Finding(check_id, "warn", text, evidence,
                   advice=_advice(found, b, calls, loop, called_at, epochs))


def _advice(found: list[Cause], b: Breakdown, calls: Sequence[DatasetCall],
            loop: str | None, called_at: dict[str, Any] | None, epochs: int | None) -> str:
    out: list[str] = []
    for c in found:
        if c.name == "input-bound":
            fixes = pipeline_fixes(calls, epochs)
            top = b.xprof.input_ops[0] if b.xprof and b.xprof.input_ops else None
            if top is not None:
                out.append(f"tf.data's time goes to {top.name} ({top.self_share:.0%} of the "
                           "input pipeline, xprof)")
            if fixes:
                out += fixes
            elif any(x.caller and x.caller.get("direct") for x in calls):
                out.append("the program's pipeline already maps in parallel and prefetches: "
                           "the per-element work itself outruns the step; make it cheaper, "
                           "cache() after it when the data fits, or preprocess offline")
            else:
                out.append("the program's tf.data calls were not recorded: see the input "
                           "pipeline in TensorBoard's Profile tab")
        elif c.name == "host-bound":
            where = ""
            if called_at:
                where = f" (the loop at {str(called_at['file']).rsplit('/', 1)[-1]}:" \
                        f"{called_at['line']})"
            out.append(f"move the per-step Python work between the calls of {loop or 'the step'}"
                       f"{where} into the tf.function, or do it every N steps")
        elif c.name == "communication-bound":
            out.append("fewer, larger all-reduces: a larger batch per replica, or fewer "
                       "replicas for a model this size")
        elif c.name == "launch-bound":
            out.append("many small ops: a larger batch, XLA (jit_compile=True) to fuse them")
        elif c.name == "overhead-bound":
            fit = "compile(..., steps_per_execution=N) so that each call of the step " \
                "function runs N steps"
            loop_fix = f"run several steps in each call of {loop or 'the step function'} " \
                "(a loop over the iterator inside the tf.function)"
            more = fit if loop and "fit" in loop else loop_fix if loop else \
                f"Keras: {fit}; a custom loop: {loop_fix}"
            out.append(f"more work per step call: {more}; or a larger batch")
        elif c.name == "idle-gpus":
            out.append("a strategy over every GPU gives each a replica that runs kernels "
                       "every step: check the devices the program gives its strategy "
                       "(MirroredStrategy() with no list takes every visible GPU) and "
                       "CUDA_VISIBLE_DEVICES")
        elif c.name == "small-kernels" and gpu_fill.ADVICE not in out:
            out.append(gpu_fill.ADVICE)
        elif c.name == "straggler":
            out.append("the replicas do not start together: look for per-replica input or "
                       "host work in the Profile tab's trace viewer")
    return "; ".join(out)
