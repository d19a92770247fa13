"""`gpudiag memory`: TensorFlow's memory modes, each in its own child process.

The probe (gpudiag/probes/memory.py) runs the same stepwise allocation pattern in every
mode and reads TensorFlow's view (get_memory_info) and NVML's view at each step. Without
a GPU the first child says so and the GPU modes become skip findings; the CPU's memory
info and the "modify after initialise" error are still observed.

Writes one TensorBoard run per mode (``memory-<mode>/``: scalars ``memory/tf_current_mib``,
``memory/tf_peak_mib``, ``memory/nvml_process_mib``, ``memory/nvml_device_used_mib`` by
step), a table as TensorBoard text (``gpudiag/memory``) and the findings ``memory.*``.

NVML in this process (GPU:0's total memory, for ``--fraction``) comes in as ``backend``,
opened and closed by the caller (the CLI); each child opens its own (probes/memory.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from gpudiag import nvml, verdicts
from gpudiag.report import Finding
from gpudiag.runner import ChildResult, run_child
from gpudiag.session import RunSession
from gpudiag.tb import EventWriter, markdown_table

TAG_MEMORY = "gpudiag/memory"
TB_RUN_PREFIX = "memory-"
DEFAULT_STEPS = 8
DEFAULT_STEP_MB = 64
DEFAULT_LIMIT_MB = 1024


def limit_from_fraction(fraction: float, total_bytes: int) -> int:
    """per_process_gpu_memory_fraction -> a memory_limit in MiB (of the GPU's total memory)."""
    return max(1, int(fraction * total_bytes) // 2**20)


def gpu0_total_bytes(
    backend: nvml.NvmlBackend | nvml.NvmlUnavailable,
) -> tuple[int | None, str | None]:
    """Total memory of the NVML device behind TensorFlow's GPU:0 (the children run with
    CUDA_DEVICE_ORDER=PCI_BUS_ID, NVML's order), or why it is unknown."""
    if isinstance(backend, nvml.NvmlUnavailable):
        return None, backend.reason
    found = nvml.gpu0_device(
        backend, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
        cuda_device_order=child_env("default")["CUDA_DEVICE_ORDER"],
    )
    if isinstance(found, str):
        return None, found
    total = found.info.memory_total_bytes
    if total is nvml.NOT_AVAILABLE:
        return None, "NVML gives no total memory"
    return int(total), None


def child_env(mode: str) -> dict[str, str]:
    env = {"CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER", "PCI_BUS_ID")}
    if mode == "growth_env":
        env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true"
    return env


def write_scalars(session: RunSession, mode: str, result: dict[str, Any]) -> None:
    """One TensorBoard run per mode (``memory-cpu`` for the pattern on the CPU)."""
    pattern = result.get("pattern") or {}
    readings = pattern.get("readings") or []
    if not readings:
        return
    name = "cpu" if pattern.get("device") == "/CPU:0" else mode
    with EventWriter(session.run_dir / f"{TB_RUN_PREFIX}{name}") as writer:
        for k, r in enumerate(readings):
            writer.scalar("memory/tf_current_mib", r["tf_current_bytes"] / 2**20, k)
            writer.scalar("memory/tf_peak_mib", r["tf_peak_bytes"] / 2**20, k)
            if r.get("nvml_process_used_bytes") is not None:
                writer.scalar("memory/nvml_process_mib", r["nvml_process_used_bytes"] / 2**20, k)
            if r.get("nvml_device_used_bytes") is not None:
                writer.scalar("memory/nvml_device_used_mib", r["nvml_device_used_bytes"] / 2**20,
                              k)


def _row(mode: str, finding: Finding) -> list[Any]:
    e = finding.evidence

    def mib(key: str) -> Any:
        return None if e.get(key) is None else round(e[key] / 2**20)

    return [mode, finding.status, mib("tf_peak_bytes"), mib("nvml_held_max_bytes"),
            e.get("nvml_source") or "", finding.message]


def run(
    session: RunSession,
    *,
    timeout_s: float,
    steps: int = DEFAULT_STEPS,
    step_mb: int = DEFAULT_STEP_MB,
    memory_limit_mb: int | None = None,
    fraction: float | None = None,
    backend: nvml.NvmlBackend | nvml.NvmlUnavailable,
    announce: Callable[[str], Any] | None = None,
) -> None:
    say = announce or (lambda _msg: None)
    base = {"steps": steps, "step_mb": step_mb}
    results: dict[str, dict[str, Any]] = {}
    rows: list[list[Any]] = []

    def child(mode: str, config: dict[str, Any]) -> ChildResult:
        say(f"memory mode {mode}: child process ...")
        out = run_child("memory", {**base, "mode": mode, **config}, run_dir=session.run_dir,
                        name=f"memory-{mode}", timeout_s=timeout_s, env=child_env(mode))
        if out.ok and out.result is not None:
            results[mode] = out.result
            session.set("memory", results)
            write_scalars(session, mode, out.result)
        return out

    def add(mode: str, finding: Finding) -> None:
        session.add(finding)
        rows.append(_row(mode, finding))

    first = child("default", {})
    if not first.ok or first.result is None:
        add("default", verdicts.child_failed("memory.default", "the default-mode memory probe",
                                             first))
    elif not first.result["gpu_available"]:
        reason = "TensorFlow sees no GPU"
        nvml_reason = first.result["nvml"].get("reason")
        if nvml_reason:
            reason += f"; NVML: {nvml_reason}"
        add("cpu", verdicts.memory_cpu(first.result))
        for mode in verdicts.MEMORY_GPU_MODES:
            add(mode, verdicts.memory_no_gpu(mode, reason))
    else:
        add("default", verdicts.memory_default(first.result))
        for mode in ("growth", "growth_env"):
            check_id = verdicts.MEMORY_GPU_MODES[mode]
            out = child(mode, {})
            add(mode, verdicts.memory_growth(out.result, check_id=check_id,
                                             default=first.result)
                if out.ok and out.result is not None
                else verdicts.child_failed(check_id, f"the {mode} memory probe", out))
        limit_mb, why = memory_limit_mb or DEFAULT_LIMIT_MB, None
        if fraction is not None:
            total, why = gpu0_total_bytes(backend)
            if total is not None:
                limit_mb = limit_from_fraction(fraction, total)
                say(f"--fraction {fraction:g} of {total / 2**30:.1f} GiB = {limit_mb} MiB")
        if why is not None:
            add("limit", Finding(
                "memory.limit", "skip",
                f"--fraction {fraction:g} needs GPU:0's total memory, which only NVML gives: "
                f"{why}", {"fraction": fraction, "reason": why},
                advice="Give the limit in MiB with --memory-limit-mb instead."))
        else:
            out = child("limit", {"memory_limit_mb": limit_mb})
            if out.ok and out.result is not None:
                add("limit", verdicts.memory_limit(out.result, limit_mb))
            else:
                add("limit", verdicts.child_failed(
                    "memory.limit", f"the memory-limit probe ({limit_mb} MiB)", out))
    out = child("modify_after_init", {})
    add("modify_after_init", verdicts.memory_modify_after_init(out.result)
        if out.ok and out.result is not None
        else verdicts.child_failed("memory.modify-after-init",
                                   "the modify-after-initialise probe", out))
    session.text(TAG_MEMORY, markdown_table(
        ["mode", "status", "TF peak MiB", "NVML held MiB", "NVML source", "finding"], rows))
