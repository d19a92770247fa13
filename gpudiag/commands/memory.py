"""`gpudiag memory`: TensorFlow's memory modes, each in its own child process.

The probe (gpudiag/probes/memory.py) runs the same stepwise allocation pattern in every
mode and reads TensorFlow's view (get_memory_info) and NVML's view at each step. Without
a GPU the first child says so and the GPU modes become skip findings; the CPU's memory
info and the "modify after initialise" error are still observed.

Writes one TensorBoard run per mode (``memory-<mode>/``: scalars ``memory/tf_current_mib``,
``memory/tf_peak_mib``, ``memory/nvml_process_mib``, ``memory/nvml_device_used_mib`` by
step), a table as TensorBoard text (``gpudiag/memory``) and the findings ``memory.*``.
Names and tags: gpudiag/layout/__init__.py.

NVML in this process (GPU:0's total memory, for ``--fraction``) comes in as ``backend``,
opened and closed by the caller (the CLI); each child opens its own (probes/memory.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from gpudiag import nvml
from gpudiag.devnames import device_type
from gpudiag.layout import (
    TAG_MEMORY,
    TAG_MEMORY_NVML_DEVICE_USED,
    TAG_MEMORY_NVML_PROCESS,
    TAG_MEMORY_TF_CURRENT,
    TAG_MEMORY_TF_PEAK,
    memory_run_name,
)
from gpudiag.markdown import markdown_table
from gpudiag.procs.runner import ChildResult, run_child
from gpudiag.records.results import MemoryConfig, MemoryResult
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.tb import views as tbviews
from gpudiag.tb.writer import EventWriter
from gpudiag.ui import Ui
from gpudiag.verdicts import common as common_verdicts
from gpudiag.verdicts import memory as memory_verdicts

DEFAULT_STEPS = MemoryConfig.steps
DEFAULT_STEP_MB = MemoryConfig.step_mb
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


def write_scalars(session: RunSession, mode: str, result: MemoryResult) -> bool:
    """One TensorBoard run per mode (``memory-cpu`` for the pattern on the CPU); False
    when the mode had no readings to write."""
    pattern = result.pattern
    if pattern is None or not pattern.readings:
        return False
    name = "cpu" if device_type(pattern.device) == "CPU" else mode
    with EventWriter(session.run_dir / memory_run_name(name)) as writer:
        for k, r in enumerate(pattern.readings):
            writer.scalar(TAG_MEMORY_TF_CURRENT, r.tf_current_bytes / 2**20, k)
            writer.scalar(TAG_MEMORY_TF_PEAK, r.tf_peak_bytes / 2**20, k)
            if r.nvml_process_used_bytes is not None:
                writer.scalar(TAG_MEMORY_NVML_PROCESS, r.nvml_process_used_bytes / 2**20, k)
            if r.nvml_device_used_bytes is not None:
                writer.scalar(TAG_MEMORY_NVML_DEVICE_USED,
                              r.nvml_device_used_bytes / 2**20, k)
    return True


def _row(mode: str, finding: Finding) -> list[Any]:
    e = finding.evidence

    def mib(key: str) -> Any:
        return None if e.get(key) is None else round(e[key] / 2**20)

    return [mode, finding.status, mib("tf_peak_bytes"), mib("nvml_held_max_bytes"),
            e.get("nvml_source") or "", finding.message]


@dataclass(frozen=True)
class MemoryOptions:
    """What `memory` was asked: each probe's size and the limit mode's limit."""

    timeout_s: float
    steps: int = DEFAULT_STEPS
    step_mb: int = DEFAULT_STEP_MB
    memory_limit_mb: int | None = None  # None: DEFAULT_LIMIT_MB, or --fraction's
    fraction: float | None = None  # of GPU:0's total memory (NVML)


def run(session: RunSession, options: MemoryOptions, *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui) -> None:
    """One child per memory mode, each judged; the table and charts at the end."""
    probe = _Probes(session, options, ui)
    first, default = probe.child("default")
    if default is None:
        probe.add("default", common_verdicts.child_failed(
            "memory.default", "the default-mode memory probe", first))
    elif not default.gpu_available:
        reason = "TensorFlow sees no GPU"
        if default.nvml.reason:
            reason += f"; NVML: {default.nvml.reason}"
        probe.add("cpu", memory_verdicts.memory_cpu(default))
        for mode in memory_verdicts.MEMORY_GPU_MODES:
            probe.add(mode, memory_verdicts.memory_no_gpu(mode, reason))
    else:
        probe.add("default", memory_verdicts.memory_default(default))
        for mode in ("growth", "growth_env"):
            check_id = memory_verdicts.MEMORY_GPU_MODES[mode]
            out, result = probe.child(mode)
            probe.add(mode, memory_verdicts.memory_growth(result, check_id=check_id,
                                                          default=default)
                      if result is not None
                      else common_verdicts.child_failed(check_id, f"the {mode} memory probe",
                                                        out))
        probe.limit_mode(backend)
    out, result = probe.child("modify_after_init")
    probe.add("modify_after_init", memory_verdicts.memory_modify_after_init(result)
              if result is not None
              else common_verdicts.child_failed("memory.modify-after-init",
                                                "the modify-after-initialise probe", out))
    session.text(TAG_MEMORY, markdown_table(
        ["mode", "status", "TF peak MiB", "NVML held MiB", "NVML source", "finding"],
        probe.rows))
    if probe.charted:
        tbviews.write_charts(session.run_dir, tbviews.memory_charts())


class _Probes:
    """The memory probes of one run: each mode's child, its finding and table row."""

    def __init__(self, session: RunSession, options: MemoryOptions, ui: Ui) -> None:
        self.session, self.options, self.ui = session, options, ui
        self.results: dict[str, dict[str, Any]] = {}
        self.rows: list[list[Any]] = []
        self.charted: list[str] = []  # modes with a TensorBoard run

    def child(self, mode: str,
              limit_mb: int | None = None) -> tuple[ChildResult, MemoryResult | None]:
        self.ui.say(f"memory mode {mode}: in a child process")
        config = MemoryConfig(mode=mode, steps=self.options.steps,
                              step_mb=self.options.step_mb, memory_limit_mb=limit_mb)
        out = run_child("memory", config, run_dir=self.session.run_dir,
                        name=memory_run_name(mode), timeout_s=self.options.timeout_s,
                        env=child_env(mode))
        if not out.ok or out.result is None:
            return out, None
        self.results[mode] = out.result
        self.session.set("memory", self.results)
        result = MemoryResult.from_dict(out.result)
        if write_scalars(self.session, mode, result):
            self.charted.append(mode)
        return out, result

    def add(self, mode: str, finding: Finding) -> None:
        self.session.add(finding)
        self.rows.append(_row(mode, finding))

    def limit_mode(self, backend: nvml.NvmlBackend | nvml.NvmlUnavailable) -> None:
        """The memory-limit mode: --memory-limit-mb, or --fraction of GPU:0 (NVML's total)."""
        fraction = self.options.fraction
        limit_mb, why = self.options.memory_limit_mb or DEFAULT_LIMIT_MB, None
        if fraction is not None:
            total, why = gpu0_total_bytes(backend)
            if total is not None:
                limit_mb = limit_from_fraction(fraction, total)
                self.ui.say(f"--fraction {fraction:g} of {total / 2**30:.1f} GiB = {limit_mb} MiB")
        if why is not None:
            self.add("limit", Finding(
                "memory.limit", "skip",
                f"--fraction {fraction:g} needs GPU:0's total memory, which only NVML gives: "
                f"{why}", {"fraction": fraction, "reason": why},
                title=f"--fraction {fraction:g} needs NVML for GPU:0's total memory",
                advice="Give the limit in MiB with --memory-limit-mb instead."))
            return
        out, result = self.child("limit", limit_mb)
        if result is not None:
            self.add("limit", memory_verdicts.memory_limit(result, limit_mb))
        else:
            self.add("limit", common_verdicts.child_failed(
                "memory.limit", f"the memory-limit probe ({limit_mb} MiB)", out))
