"""run.precision: a half-precision Keras policy on a device that has no fast half
precision (pure).

``keras.mixed_precision.set_global_policy('mixed_float16')`` (or ``'mixed_bfloat16'``)
makes every layer compute in 16 bits. That is faster only where the hardware computes in
16 bits faster than in 32: NVIDIA GPUs of compute capability 7.0 and up for float16
(Tensor Cores; 8.0 and up for bfloat16), TPUs. On a CPU, TensorFlow's mixed precision
guide says it "runs float16 operations slower than float32 operations"; measured on this
project's CPU for the guide's own model (tests/programs/mixed_precision_guide.py, under
the load of other jobs): mixed_float16 about 40x slower per step than float32;
mixed_bfloat16 2x slower at batch 256 but 1.2x faster at the guide's batch of 8192 (the
CPU has AVX512_BF16 and AMX, which oneDNN uses): on the CPU bfloat16 is said, not warned
(docs/run-findings.md).

The evidence: the policy of each model fit (the fit's ``dtype_policy``), the line that
set the global policy (a configuration call the Keras hooks record), and the devices
TensorFlow listed (GPUs and their compute capability). Nothing is said where no 16-bit
policy was seen; skipped where the device is not known.
"""

from __future__ import annotations

import statistics
from typing import Any

from gpudiag.layout.events import ConfigCall
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title

HALF = {"mixed_float16": "float16", "float16": "float16",
        "mixed_bfloat16": "bfloat16", "bfloat16": "bfloat16"}
FAST_FROM = {"float16": (7, 0), "bfloat16": (8, 0)}  # compute capability with fast math
SETTERS = ("set_global_policy", "set_dtype_policy")
# measured here (the module's docstring): the guide's model, per step, against float32
MEASURED_ON_CPU = "about 40x slower"  # mixed_float16; mixed_bfloat16 went both ways


def _where(call: ConfigCall | None) -> str:
    c = call.caller if call is not None else None
    return f"{c['file'].rsplit('/', 1)[-1]}:{c['line']}" if c else ""


def _capability(gpu: dict[str, Any]) -> tuple[int, int] | None:
    details = gpu.get("details")
    cc = details.get("compute_capability") if isinstance(details, dict) else None
    if isinstance(cc, list | tuple) and len(cc) == 2 and all(isinstance(v, int) for v in cc):
        return int(cc[0]), int(cc[1])
    return None


def precision(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """The 16-bit policy the program's models used, against the device they ran on."""
    setters = [c for c in obs.config_calls if c.api.rsplit(".", 1)[-1] in SETTERS and
               not c.error_type and c.args]
    fits = [s for s in obs.series if s.kind == "fit" and s.facts.get("dtype_policy")]
    policy = fits[-1].facts["dtype_policy"] if fits else \
        (str(setters[-1].args[0]) if setters else None)
    half = HALF.get(policy or "")
    if policy is None or half is None:
        return None
    setter = next((c for c in reversed(setters) if c.args[0] == policy), None)
    line = _where(setter)
    named = f"the {policy} policy" + (f" (set at {line})" if line else "")
    evidence: dict[str, Any] = {"policy": policy, "set_at": setter.caller if setter else None,
                                "fits": [s.label for s in fits]}
    snap = obs.devices
    if snap is None:
        return Finding(f"run.precision{proc}", "skip", f"{named}: TensorFlow's devices were "
                       "never listed, so whether they compute in 16 bits fast is not known",
                       evidence, title=f"{policy}: devices not listed, its cost not known")
    gpus = [d for d in snap.logical if ":GPU:" in d.upper()]
    timed = [s.duration_s for f in fits for s in f.steps[1:] if s.duration_s]
    step = f"; Model.fit's step took {statistics.median(timed) * 1e3:.1f} ms (median of " \
        f"{len(timed)})" if timed else ""
    evidence.update(gpus=gpus, step_s_median=statistics.median(timed) if timed else None)
    change = f"drop the set_global_policy('{policy}') call at {line}" if line else \
        "set the policy back to float32 (keras.mixed_precision.set_global_policy('float32'))"
    if not gpus:
        return _on_cpu(proc, policy, half, (named, step, change, line), evidence)
    caps = {g.get("name", "?"): _capability(g) for g in snap.gpus}
    evidence["compute_capability"] = caps
    known = {n: c for n, c in caps.items() if c is not None}
    if not known:
        return Finding(f"run.precision{proc}", "skip", f"{named} on {', '.join(gpus)}: "
                       "their compute capability was not listed, so whether they compute "
                       f"{half} fast is not known", evidence,
                       title=f"{policy}: the GPUs' compute capability not listed")
    slow = {n: c for n, c in known.items() if c < FAST_FROM[half]}
    shown = ", ".join(f"{n.rsplit('/', 1)[-1]} (compute capability {c[0]}.{c[1]})"
                      for n, c in (slow or known).items())
    if not slow:
        return Finding(f"run.precision{proc}", "ok", f"{named} on {shown}: Tensor Cores "
                       f"compute {half}", evidence,
                       title=title(f"{policy} on GPUs with Tensor Cores for {half}",
                                   f"{policy}: the GPUs compute it fast"))
    return Finding(
        f"run.precision{proc}", "warn",
        f"{named} on {shown}: below compute capability "
        f"{'.'.join(map(str, FAST_FROM[half]))} there are no Tensor Cores for {half}: "
        "the layers pay the casts for no faster math (TensorFlow's mixed precision guide: "
        "older GPUs offer no math performance benefit; only the memory saved can "
        f"help){step}", evidence,
        advice=f"Keep float32 on these GPUs: {change}"
        + (" (or use mixed_float16 from compute capability 7.0)" if half == "bfloat16"
           else "") + ".",
        title=title(f"{policy} on GPUs without Tensor Cores for {half}: no faster math",
                    f"{policy}: these GPUs have no fast {half}"),
        actions=(Action(change, line),))


def _on_cpu(proc: str, policy: str, half: str, said: tuple[str, str, str, str | None],
            evidence: dict[str, Any]) -> Finding:
    """A 16-bit policy with no GPU visible: bfloat16 said as a measurement to make (some
    CPUs compute it natively), float16 as slower than float32. ``said``: the policy named
    with its line, the step's words, the change in words and the line it is at."""
    named, step, change, line = said
    evidence["device"] = "CPU"
    if half == "bfloat16":
        return Finding(
            f"run.precision{proc}", "ok",
            f"{named} on the CPU only (no GPU visible): whether bfloat16 is faster there "
            "depends on the CPU and the sizes (oneDNN computes bfloat16 natively on CPUs "
            "with AVX512_BF16 or AMX; measured on gpudiag's test CPU, which has both, for "
            "the mixed precision guide's model: 2x slower than float32 at batch 256, 1.2x "
            f"faster at batch 8192){step}", evidence,
            advice="Time one epoch with the policy and one without (float32) on this "
            "machine, and keep the faster.",
            title=title(f"{policy} on the CPU: faster or slower than float32 by CPU and size",
                        f"{policy} on the CPU: time it against float32"))
    return Finding(
        f"run.precision{proc}", "warn",
        f"{named} on the CPU only (no GPU visible): a CPU has no fast {half}, so every "
        f"layer computes in a type slower than float32 (TensorFlow's mixed precision "
        f"guide: the CPU \"runs float16 operations slower than float32 operations\"; "
        f"measured on gpudiag's test CPU for the guide's model: {MEASURED_ON_CPU} "
        f"per step than float32){step}", evidence,
        advice=f"Keep float32 where no GPU computes {half} fast: {change}, or set it "
        "only when tf.config.list_physical_devices('GPU') lists a GPU of compute "
        f"capability {'.'.join(map(str, FAST_FROM[half]))} or more.",
        title=title(f"{policy} on a CPU: {half} math is slower here than float32",
                    "a 16-bit policy on a CPU: slower here than float32"),
        actions=(Action(change, line),))
