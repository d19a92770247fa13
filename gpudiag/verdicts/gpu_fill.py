"""How much of each GPU its kernels used: NVML's utilization against GPM's SM utilization.

NVML's ``utilization.gpu`` is the share of time any kernel ran: one busy SM out of 132 reads
100 %. GPM (Hopper and later) measures the share of SMs busy (SM utilization) and of warps
resident against the maximum (occupancy). A GPU NVML calls busy (mean utilization at least
BUSY_UTIL_PERCENT) whose SM utilization stays under FEW_SMS_PERCENT ran a few small
kernels: it is "100 % utilized" with most of it idle. Both thresholds are gpudiag's own.

Pure: the per-GPU numbers of gpudiag.verdicts.gpu_use.gpu_numbers (plain dicts) in;
findings and bottleneck notes out. Used by `monitor` and `run` (``<cmd>.sm-utilization``)
and by run.bottleneck (gpudiag.verdicts.bottleneck).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from gpudiag.report import Finding
from gpudiag.verdicts.common import title

BUSY_UTIL_PERCENT = 50.0
FEW_SMS_PERCENT = 25.0
ADVICE = ("give each kernel more work: a larger batch (per replica), XLA "
          "(jit_compile=True) to fuse small ops, mixed precision for tensor cores; the "
          "Profile tab's kernel stats list the small kernels")


@dataclass(frozen=True)
class Fill:
    """One GPU: NVML's mean utilization beside GPM's means (None where not measured)."""

    index: int
    util_mean_percent: float | None
    sm_util_mean_percent: float | None
    sm_occupancy_mean_percent: float | None
    tensor_util_mean_percent: float | None
    dram_bw_util_mean_percent: float | None
    gpm_readings: int
    gpm_unavailable_reason: str | None

    @classmethod
    def of(cls, gpu: dict[str, Any]) -> Fill:
        return cls(gpu["index"], gpu.get("util_mean_percent"), gpu.get("sm_util_mean_percent"),
                   gpu.get("sm_occupancy_mean_percent"), gpu.get("tensor_util_mean_percent"),
                   gpu.get("dram_bw_util_mean_percent"), gpu.get("gpm_readings") or 0,
                   gpu.get("gpm_unavailable_reason"))

    @property
    def measured(self) -> bool:
        return self.sm_util_mean_percent is not None

    @property
    def small_kernels(self) -> bool:
        """NVML calls it busy, GPM shows few SMs at work."""
        return (self.util_mean_percent is not None and self.sm_util_mean_percent is not None
                and self.util_mean_percent >= BUSY_UTIL_PERCENT
                and self.sm_util_mean_percent < FEW_SMS_PERCENT)

    def gpm_text(self) -> str:
        parts = [f"{name} {value:.0f} %" for name, value in (
            ("SM utilization", self.sm_util_mean_percent),
            ("occupancy", self.sm_occupancy_mean_percent),
            ("tensor cores", self.tensor_util_mean_percent),
            ("DRAM bandwidth", self.dram_bw_util_mean_percent)) if value is not None]
        return ", ".join(parts)

    def text(self) -> str:
        util = "n/a" if self.util_mean_percent is None else f"{self.util_mean_percent:.0f} %"
        if not self.measured:
            return f"GPU {self.index}: GPM metrics unavailable ({self.gpm_unavailable_reason})"
        if self.small_kernels:
            return (f"GPU {self.index} is 'busy' with a few small kernels: NVML's utilization "
                    f"{util} (a kernel ran), GPM's {self.gpm_text()} (means over "
                    f"{self.gpm_readings} readings)")
        return f"GPU {self.index}: utilization {util}, GPM's {self.gpm_text()}"


def fills(gpus: Sequence[dict[str, Any]]) -> list[Fill]:
    return [Fill.of(g) for g in gpus]


def gpus_of(pid: int, gpus: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The GPUs NVML listed ``pid`` on; every GPU when NVML lists it on none (no process
    list, or a container whose pids NVML does not see)."""
    return [g for g in gpus if pid in (g.get("processes") or [])] or list(gpus)


def sm_utilization(gpus: Sequence[dict[str, Any]], *, nvml_unavailable_reason: str | None,
                   check_id: str) -> Finding:
    """``<cmd>.sm-utilization``: did the kernels fill the GPUs NVML calls busy?"""
    if nvml_unavailable_reason is not None:
        return Finding(check_id, "skip", "how much of each GPU the kernels used is not "
                       f"measured: NVML is not available ({nvml_unavailable_reason})",
                       {"reason": nvml_unavailable_reason},
                       title="no NVML: how much of each GPU kernels used is not measured")
    found = fills(gpus)
    evidence: dict[str, Any] = {"gpus": [asdict(f) for f in found],
                                "thresholds": {"busy_util_percent": BUSY_UTIL_PERCENT,
                                               "few_sms_percent": FEW_SMS_PERCENT}}
    if not found:
        return Finding(check_id, "skip", "no GPU was sampled", evidence,
                       title="no GPU was sampled")
    small = [f for f in found if f.small_kernels]
    blind = [f for f in found if not f.measured]
    unmeasured = "; ".join(f.text() for f in blind)
    if small:
        rest = [f for f in found if f.measured and not f.small_kernels]
        text = "; ".join(f.text() for f in small + rest) + (f"; {unmeasured}" if blind else "")
        top = small[0]
        return Finding(check_id, "warn", text, evidence, advice=ADVICE[0].upper() + ADVICE[1:],
                       title=title(f"GPU {top.index} 'busy' with small kernels: SMs "
                                   f"{top.sm_util_mean_percent:.0f} % used at "
                                   f"{top.util_mean_percent:.0f} % utilization",
                                   f"{len(small)} GPU(s) 'busy' with a few small kernels"))
    if not [f for f in found if f.measured]:
        return Finding(check_id, "skip",
                       "NVML's utilization says whether a kernel ran, not how much of the GPU it "
                       "used, and GPM (Hopper and later) is unavailable here: " + unmeasured,
                       evidence, title="GPM unavailable: how much of each GPU was used unknown")
    text = "; ".join(f.text() for f in found if f.measured) + (f"; {unmeasured}" if blind else "")
    measured = [f for f in found if f.measured]
    return Finding(check_id, "ok", text, evidence,
                   title=f"kernels filled the SMs of {len(measured)} GPU(s) (GPM)")


@dataclass(frozen=True)
class BottleneckNote:
    """What run.bottleneck says of the GPUs' fill: the GPUs with few small kernels (a
    cause), a note for its message, and its evidence."""

    small: tuple[Fill, ...]
    text: str
    evidence: dict[str, Any]


def bottleneck_note(gpus: Sequence[dict[str, Any]] | None, gpu_trace: bool) -> BottleneckNote:
    """From the process's GPUs (None: NVML did not sample). A CPU-only program with no
    NVML gets no text, only the evidence."""
    if gpus is None:
        reason = "NVML did not sample the GPUs"
        return BottleneckNote((), f"{reason}: whether the kernels filled the GPU is not "
                              "measured" if gpu_trace else "", {"unavailable": reason})
    found = fills(gpus)
    evidence = {"gpus": [asdict(f) for f in found],
                "thresholds": {"busy_util_percent": BUSY_UTIL_PERCENT,
                               "few_sms_percent": FEW_SMS_PERCENT}}
    small = tuple(f for f in found if f.small_kernels)
    text = "; ".join(f.text() for f in found if not f.small_kernels)
    return BottleneckNote(small, text, evidence)
