"""Verdicts of `gpudiag memory`: each TensorFlow memory mode, TF's view beside NVML's.

Evidence: one memory probe result per mode (gpudiag/probes/memory.py): the readings of
the allocation pattern (TensorFlow's current/peak bytes, NVML's device and process used
bytes per step), the limit probe's oversized allocation, the modify-after-init attempts.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from gpudiag.layout.units import counted
from gpudiag.layout.units import share as pct
from gpudiag.records.results import MemoryReading, MemoryResult
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import MIB, mib_text, title

# CUDA context, cuBLAS/cuDNN handles and TF's own bookkeeping sit on top of the tensors:
# NVML's used memory may exceed TensorFlow's peak by this much and still "track" it.
MEMORY_OVERHEAD_ALLOWANCE_BYTES = 2**30
MEMORY_GPU_MODES = {"default": "memory.default", "growth": "memory.growth",
                    "growth_env": "memory.growth-env", "limit": "memory.limit"}
_MODIFY_FIX = ("configure devices first thing after importing TensorFlow, before any op, "
               "tf.function, Keras model or tf.config.list_logical_devices() call touches "
               "them; or set TF_FORCE_GPU_ALLOW_GROWTH=true in the environment, which needs "
               "no code")


@dataclass(frozen=True)
class MemorySeries:
    """One mode's numbers: TensorFlow's peak, and what NVML says the process held.

    NVML's "process used" is the process's own entry when NVML lists it (pids match
    outside containers), else the device's used memory minus the baseline taken before
    TensorFlow started in that process.
    """

    tf_peak_bytes: int  # the highest peak of any reading
    tf_peak_by_step: list[int]  # initialised, then each growth step
    nvml_held_by_step: list[int | None]  # the same steps, None where NVML gave nothing
    nvml_held_max_bytes: int | None
    nvml_source: str | None  # "process" | "device minus baseline" | None (no NVML)
    nvml_total_bytes: int | None
    released_current_bytes: int | None  # TensorFlow's current bytes after the release


def memory_series(result: MemoryResult) -> MemorySeries:
    """The numbers of one mode's allocation pattern (see MemorySeries)."""
    readings = result.pattern.readings if result.pattern else []
    grow = [r for r in readings if r.phase in ("initialised", "grow")]
    baseline = result.nvml.baseline_device_used_bytes

    def held(r: MemoryReading) -> int | None:
        if r.nvml_process_used_bytes is not None:
            return r.nvml_process_used_bytes
        if r.nvml_device_used_bytes is not None and baseline is not None:
            return max(0, r.nvml_device_used_bytes - baseline)
        return None

    nvml_held = [held(r) for r in grow]
    known = [h for h in nvml_held if h is not None]
    source = ("process" if any(r.nvml_process_used_bytes is not None for r in grow)
              else "device minus baseline" if known else None)
    return MemorySeries(
        tf_peak_bytes=max((r.tf_peak_bytes for r in readings), default=0),
        tf_peak_by_step=[r.tf_peak_bytes for r in grow],
        nvml_held_by_step=nvml_held,
        nvml_held_max_bytes=max(known) if known else None,
        nvml_source=source,
        nvml_total_bytes=result.nvml.total_bytes,
        released_current_bytes=readings[-1].tf_current_bytes if readings else None,
    )


MEMORY_MODE_NAMES = {"default": "the default mode",
                     "growth": "memory growth (set_memory_growth)",
                     "growth_env": "TF_FORCE_GPU_ALLOW_GROWTH=true",
                     "limit": "the memory limit (memory_limit)"}


def memory_no_gpu(mode: str, reason: str) -> Finding:
    """A GPU memory mode that cannot run without a GPU: a skip with the reason."""
    return Finding(MEMORY_GPU_MODES[mode], "skip",
                   f"{MEMORY_MODE_NAMES[mode]} needs a GPU: {reason}", {"reason": reason},
                   title=title(f"{MEMORY_MODE_NAMES[mode]} needs a GPU: not tried",
                               "this memory mode needs a GPU: not tried"),
                   advice="Run `gpudiag memory` on a machine where TensorFlow sees a GPU "
                          "(`gpudiag env` says why it does not here).")


def memory_cpu(result: MemoryResult) -> Finding:
    """Without a GPU: TensorFlow's CPU allocator's view of the same pattern."""
    s = memory_series(result)
    pattern = result.pattern
    if pattern is None:
        return Finding("memory.cpu", "fail", "the memory probe ran no allocation pattern",
                       asdict(s), title="the memory probe ran no allocation pattern")
    evidence = {"device": pattern.device, **asdict(s),
                "readings": [r.to_dict() for r in pattern.readings]}
    expected = pattern.steps * pattern.step_mb * MIB
    peak = s.tf_peak_bytes
    text = (f"no GPU: on {pattern.device} TensorFlow's memory info rose to a peak of "
            f"{mib_text(peak)} over {counted(pattern.steps, 'step')} of {pattern.step_mb} MiB and "
            f"fell to {mib_text(s.released_current_bytes)} after release")
    if peak < expected:
        return Finding("memory.cpu", "warn", text + f" (expected {mib_text(expected)})", evidence,
                       title=f"CPU memory: peak {mib_text(peak)}, less than the "
                             f"{mib_text(expected)} allocated",
                       advice="TensorFlow's CPU allocator reported less than was allocated; "
                              "compare the readings in the evidence.")
    return Finding("memory.cpu", "ok", text, evidence,
                   title=f"no GPU: CPU memory peaked at {mib_text(peak)} and was released")


def memory_default(result: MemoryResult) -> Finding:
    """Default mode: how much of the card the process took compared with TF's peak."""
    s = memory_series(result)
    evidence = {**asdict(s), "memory_growth": result.memory_growth}
    if s.nvml_held_max_bytes is None:
        return Finding("memory.default", "skip",
                       f"default mode ran (TensorFlow's peak {mib_text(s.tf_peak_bytes)}) but "
                       f"NVML could not say what the process held: {result.nvml.reason}",
                       evidence, title="default mode: without NVML, what was held is unknown")
    total = s.nvml_total_bytes
    share = f" ({pct(s.nvml_held_max_bytes / total)} of the card)" if total else ""
    return Finding("memory.default", "ok",
                   f"by default the process held {mib_text(s.nvml_held_max_bytes)}{share} while "
                   f"TensorFlow's own peak was {mib_text(s.tf_peak_bytes)}: TensorFlow reserves "
                   "most of the GPU up front unless told otherwise", evidence,
                   title=f"default mode held {mib_text(s.nvml_held_max_bytes)}{share} for a "
                         f"{mib_text(s.tf_peak_bytes)} peak")


def memory_growth(result: MemoryResult, *, check_id: str = "memory.growth",
                  default: MemoryResult | None = None,
                  allowance_bytes: int = MEMORY_OVERHEAD_ALLOWANCE_BYTES) -> Finding:
    """Growth works when NVML's view of the process tracks TF's peak, not the whole card:
    it grew with the pattern and stayed within twice TF's peak plus ``allowance_bytes``."""
    s = memory_series(result)
    how = ("TF_FORCE_GPU_ALLOW_GROWTH=true" if check_id.endswith("-env")
           else "set_memory_growth(gpu, True)")
    evidence = {**asdict(s), "memory_growth": result.memory_growth, "how": how,
                "allowance_bytes": allowance_bytes, "env": result.env}
    default_held = None if default is None else memory_series(default).nvml_held_max_bytes
    if default is not None:
        evidence["default_nvml_held_max_bytes"] = default_held
    if s.nvml_held_max_bytes is None:
        return Finding(check_id, "skip",
                       f"memory growth via {how}: TensorFlow's peak rose to "
                       f"{mib_text(s.tf_peak_bytes)}, but without NVML "
                       f"({result.nvml.reason}) what the process really held is unknown",
                       evidence, title=title(f"memory growth via {how}: held unknown without NVML",
                                             "memory growth: held unknown without NVML"))
    held = [h for h in s.nvml_held_by_step if h is not None]
    peaks = s.tf_peak_by_step
    grew_tf = peaks[-1] - peaks[0] if peaks else 0
    grew_nvml = held[-1] - held[0] if len(held) > 1 else 0
    # With growth the allocator extends itself in regions of doubling size, so the process
    # may hold up to about twice TensorFlow's peak, plus the CUDA context.
    tracks = (s.nvml_held_max_bytes <= 2 * s.tf_peak_bytes + allowance_bytes
              and grew_nvml >= grew_tf // 2)
    compare = f" (default mode: {mib_text(default_held)})" if default_held else ""
    if tracks:
        return Finding(check_id, "ok",
                       f"memory growth via {how} works: the process held "
                       f"{mib_text(s.nvml_held_max_bytes)} (NVML) at TensorFlow's peak of "
                       f"{mib_text(s.tf_peak_bytes)}, growing with it{compare}", evidence,
                       title=title(f"memory growth via {how} works: held "
                                   f"{mib_text(s.nvml_held_max_bytes)}",
                                   f"memory growth works: held {mib_text(s.nvml_held_max_bytes)}"))
    return Finding(check_id, "fail",
                   f"memory growth via {how} did not take effect: the process held "
                   f"{mib_text(s.nvml_held_max_bytes)} (NVML) while TensorFlow's peak was "
                   f"{mib_text(s.tf_peak_bytes)}{compare}",
                   evidence,
                   title=title(f"memory growth via {how} did not take effect",
                               "memory growth did not take effect"),
                   actions=(Action("enable memory growth on every GPU before any op runs, or "
                                   "set TF_FORCE_GPU_ALLOW_GROWTH=true before TensorFlow "
                                   "starts"),),
                   advice="Enable growth on every GPU before any op runs, or set "
                          "TF_FORCE_GPU_ALLOW_GROWTH=true before TensorFlow starts; make sure "
                          "TF_FORCE_GPU_ALLOW_GROWTH is not set to false.")


def memory_limit(result: MemoryResult, limit_mb: int,
                 allowance_bytes: int = MEMORY_OVERHEAD_ALLOWANCE_BYTES) -> Finding:
    """The limit holds when a larger allocation fails inside the child and the child lives."""
    s = memory_series(result)
    past = result.past_limit
    alive = bool(result.alive_after)
    pattern_error = result.pattern.allocation_error if result.pattern else None
    evidence = {**asdict(s), "memory_limit_mb": limit_mb,
                "past_limit": asdict(past) if past else {}, "alive_after": alive,
                "pattern_allocation_error": asdict(pattern_error) if pattern_error else None,
                "allowance_bytes": allowance_bytes}
    limit = limit_mb * MIB
    fix = ("Set the limit with tf.config.set_logical_device_configuration(gpu, "
           "[tf.config.LogicalDeviceConfiguration(memory_limit=MB)]) before any op runs.")
    if past is None or not past.raised:
        tried = "" if past is None else f": allocating {past.size_mb} MiB succeeded"
        return Finding("memory.limit", "fail",
                       f"the {limit_mb} MiB limit did not hold{tried}", evidence, advice=fix,
                       title=f"the {limit_mb} MiB memory limit did not hold")
    if past.error_type != "ResourceExhaustedError":
        return Finding("memory.limit", "warn",
                       f"allocating {past.size_mb} MiB past the {limit_mb} MiB limit "
                       f"raised {past.error_type}, not ResourceExhaustedError: "
                       f"{past.error}", evidence, advice=fix,
                       title=title(f"past the {limit_mb} MiB limit: {past.error_type}, not "
                                   "ResourceExhaustedError", f"past the {limit_mb} MiB limit: "
                                   "not ResourceExhaustedError"))
    if not alive:
        return Finding("memory.limit", "fail",
                       "after the out-of-memory error the process could no longer run an op",
                       evidence, advice=fix,
                       title="after out-of-memory the process could no longer run an op")
    if s.tf_peak_bytes > limit:
        return Finding("memory.limit", "fail",
                       f"TensorFlow's peak {mib_text(s.tf_peak_bytes)} exceeded the "
                       f"{limit_mb} MiB limit", evidence, advice=fix,
                       title=f"peak {mib_text(s.tf_peak_bytes)} exceeded the {limit_mb} MiB limit")
    held = s.nvml_held_max_bytes
    if held is not None and held > limit + allowance_bytes:
        return Finding("memory.limit", "fail",
                       f"the process held {mib_text(held)} (NVML), more than the {limit_mb} MiB "
                       "limit plus the CUDA context", evidence, advice=fix,
                       title=f"held {mib_text(held)}, over the {limit_mb} MiB limit and context")
    nvml_text = (f"; the process held {mib_text(held)} (NVML)" if held is not None
                 else f"; NVML's view unavailable ({result.nvml.reason})")
    return Finding("memory.limit", "ok",
                   f"the {limit_mb} MiB limit held: allocating {past.size_mb} MiB raised "
                   f"ResourceExhaustedError inside the child, which kept working{nvml_text}",
                   evidence, title=f"the {limit_mb} MiB memory limit held")


def memory_modify_after_init(result: MemoryResult) -> Finding:
    """The classic mistake, observed: TensorFlow refuses configuration changes after init."""
    attempts = result.attempts or []
    evidence = {"attempts": [asdict(a) for a in attempts], "gpu_available": result.gpu_available}
    raised = [a for a in attempts if a.raised]
    silent = [a for a in attempts if not a.raised]
    if not attempts:
        return Finding("memory.modify-after-init", "fail", "the probe made no attempt", evidence,
                       title="the modify-after-init probe made no attempt")
    if silent:
        return Finding("memory.modify-after-init", "fail",
                       f"TensorFlow accepted {silent[0].api} after its devices were "
                       "initialised, without an error", evidence,
                       title=title(f"{silent[0].api} was accepted after initialisation",
                                   "a device change was accepted after initialisation"),
                       advice="Unexpected for TensorFlow 2: check the TensorFlow version.")
    quotes = "; ".join(f"{a.api} raised {a.error_type}: \"{a.error}\"" for a in raised)
    where = ("" if result.gpu_available else
             " (no GPU here, so shown on the CPU; with a GPU, set_memory_growth raises "
             "\"Physical devices cannot be modified after being initialized\")")
    return Finding("memory.modify-after-init", "ok",
                   f"changing the device configuration after TensorFlow initialised its "
                   f"devices fails: {quotes}{where}. To fix: {_MODIFY_FIX}", evidence,
                   title="device configuration after initialisation raises, as expected")
