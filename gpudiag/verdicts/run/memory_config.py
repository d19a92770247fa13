"""Verdicts of `gpudiag run` on the program's GPU memory configuration (run.memory: what
took effect, beside what NVML saw the GPUs hold) and its tf.compat.v1 Sessions'
ConfigProto against its tf.config calls (run.session-config).

Pure functions of gpudiag.records.run and plain values, like gpudiag.verdicts.run.process.
"""

from __future__ import annotations

from typing import Any

from gpudiag.catalogue import match_crash
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.crash import frame_at

MEMORY_FULL_FRACTION = 0.9


def memory(obs: ProcessObservation, nvml_gpus: list[dict[str, Any]] | None,
           proc: str = "") -> Finding:
    """The memory configuration that took effect, beside what NVML saw the GPUs hold."""
    calls = [c for c in obs.config_calls if ("memory_growth" in c.api
             or "logical_device_configuration" in c.api or "virtual_device" in c.api)
             and ":CPU:" not in str(c.args[:1] or c.kwargs.get("device", ""))]  # GPU memory
    gpus = obs.devices.gpus if obs.devices else []
    growth_env = obs.start_env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    sessions = [{k: s.get(k) for k in ("allow_growth", "per_process_gpu_memory_fraction")}
                for s in obs.sessions]
    evidence = {"calls": [{"api": c.api, "args": c.args, "error": c.error} for c in calls],
                "gpus": gpus, "TF_FORCE_GPU_ALLOW_GROWTH": growth_env,
                "session_gpu_options": sessions, "nvml": nvml_gpus}
    failed = [c for c in calls if c.error_type]
    if failed:
        entry = match_crash(failed[0].error_type or "", failed[0].error or "")
        return Finding(f"run.memory{proc}", "fail",
                       f"{failed[0].api} raised {failed[0].error_type}: {failed[0].error}: the "
                       "memory configuration did not take effect", evidence,
                       advice=entry.fix if entry else "",
                       actions=(Action(f"call {failed[0].api.rsplit('.', 1)[-1]} right after "
                                       "importing TensorFlow, before any op runs",
                                       frame_at(failed[0].caller)),),
                       title=title(f"{failed[0].api.rsplit('.', 1)[-1]} raised "
                                   f"{failed[0].error_type}: memory settings not applied",
                                   "a memory setting raised: not applied"))
    if not gpus:
        return Finding(f"run.memory{proc}", "skip",
                       "no GPU visible to TensorFlow: GPU memory settings do not apply", evidence,
                       title="no GPU: GPU memory settings do not apply")
    parts = []
    for g in gpus:
        limit = g.get("logical_configuration")
        parts.append(f"{g['name'].rsplit('/', 1)[-1]}: memory growth "
                     f"{'on' if g.get('memory_growth') is True else 'off'}"
                     + (f", logical devices {limit}" if limit else ""))
    if growth_env:
        parts.append(f"TF_FORCE_GPU_ALLOW_GROWTH={growth_env}")
    full = []
    for n in nvml_gpus or []:
        used, total = n.get("peak_memory_used_bytes"), n.get("memory_total_bytes")
        if used is not None and total:
            parts.append(f"NVML GPU {n['index']}: peak {used / 2**30:.1f} of "
                         f"{total / 2**30:.1f} GiB")
            if used > MEMORY_FULL_FRACTION * total:
                full.append(n["index"])
    growth = any(g.get("memory_growth") is True for g in gpus) or growth_env == "true"
    if growth and full:
        return Finding(f"run.memory{proc}", "warn",
                       "; ".join(parts) + f": memory growth was on, yet GPU(s) {full} were "
                       "almost full", evidence,
                       title=f"memory growth on, yet {len(full)} GPU(s) almost full",
                       advice="Either the program needs that much, or growth did not take "
                       "effect (configured after initialisation, or another process holds "
                       "the memory: `nvidia-smi`).")
    return Finding(f"run.memory{proc}", "ok", "; ".join(parts), evidence,
                   title=title("; ".join(parts), f"GPU memory: {len(gpus)} GPU(s) configured"))


def session_config(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """A ConfigProto given to tf.compat.v1 Sessions, against the tf.config calls."""
    if not obs.sessions:
        return None
    apis = {c.api.rsplit(".", 1)[-1] for c in obs.config_calls if not c.error_type}
    conflicts = []
    for s in obs.sessions:
        if s.get("visible_device_list") and "set_visible_devices" in apis:
            conflicts.append(f"visible_device_list '{s['visible_device_list']}' and "
                             "tf.config.set_visible_devices both choose GPUs")
        if (s.get("allow_growth") or s.get("per_process_gpu_memory_fraction")) and \
                apis & {"set_memory_growth", "set_logical_device_configuration",
                        "set_virtual_device_configuration"}:
            conflicts.append("gpu_options (allow_growth / memory fraction) and tf.config "
                             "memory calls both configure GPU memory; the first to reach the "
                             "GPUs wins")
        # only a value the program set: without tf.config.set_soft_device_placement, tf.config
        # holds TensorFlow's default (False once eager execution is disabled), which no
        # ConfigProto contradicts (Hands-On ML's ConfigProto(allow_soft_placement=True) did)
        if obs.devices and s.get("allow_soft_placement") is not None and \
                "set_soft_device_placement" in apis and \
                obs.devices.soft_placement is not None and \
                s["allow_soft_placement"] != obs.devices.soft_placement:
            conflicts.append(f"allow_soft_placement={s['allow_soft_placement']} in the "
                             f"ConfigProto, {obs.devices.soft_placement} in tf.config: the "
                             "Session follows its ConfigProto")
    evidence = {"sessions": obs.sessions, "tf_config_calls": sorted(apis),
                "conflicts": conflicts}
    text = f"{len(obs.sessions)} Session(s); ConfigProto: " + "; ".join(
        ", ".join(f"{k}={v}" for k, v in s.items() if v not in (None, {}, "", 0, False))
        or "defaults" for s in obs.sessions)
    if conflicts:
        return Finding(f"run.session-config{proc}", "warn", f"{text}. " + "; ".join(conflicts),
                       evidence, title=f"a Session's ConfigProto conflicts with tf.config "
                       f"({len(conflicts)})",
                       advice="Configure devices in one place: tf.config calls "
                       "right after importing TensorFlow, and a ConfigProto without "
                       "device or memory settings.")
    return Finding(f"run.session-config{proc}", "ok", text, evidence,
                   title=f"{len(obs.sessions)} Session ConfigProto(s), no conflict")
