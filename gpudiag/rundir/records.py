"""The typed view of one run directory (gpudiag.rundir.load_run builds it).

A ``Run`` is read from what a command wrote (gpudiag.layout names every file): the report
(gpudiag.report.Report), each child process's files, the step series of each training loop
(its TensorBoard scalars), the per-device step breakdown of the bottleneck findings, the
profiler traces and, while the command still runs, what its live files say. The step
series are read when first asked for (``Run.loops``), so listing a logdir stays cheap.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpudiag.report import Report

RunStatus = Literal["complete", "interrupted", "running", "failed"]


@dataclass(frozen=True)
class ChildFiles:
    """One child process's files (children/<name>/): what the parent asked, what it gave
    back (None: not written, e.g. the program of `gpudiag run`), its whole output."""

    name: str
    path: Path
    config: dict[str, Any] | None
    result: dict[str, Any] | None
    stdout: Path | None
    stderr: Path | None
    events: tuple[Path, ...] = ()  # `gpudiag run`: the hooks' events-<pid>.jsonl


@dataclass(frozen=True)
class StepPoint:
    """One training step as the loop's TensorBoard run holds it (None: not recorded)."""

    step: int
    step_s: float | None  # seconds per step
    loss: float | None
    examples_per_s: float | None


@dataclass(frozen=True)
class Loop:
    """A training loop's step series: `run`'s loop of one process (program-<pid>/), or a
    scaling configuration (<strategy>-<n>dev/). ``tb_run``: its TensorBoard run, relative
    to the run directory. ``steps_per_call``: Keras fit's steps_per_execution N: each point
    is one call of the step function (its time already over N: seconds per step), its
    loss that of the call's last step."""

    name: str
    tb_run: str
    steps: tuple[StepPoint, ...]
    batch_size: int | None = None
    steps_per_call: int = 1

    def step_times(self, warmup: int = 0) -> list[float]:
        """Seconds per step, the first ``warmup`` steps left out."""
        return [p.step_s for p in self.steps[warmup:] if p.step_s is not None and p.step_s > 0]

    def losses(self) -> dict[int, float]:
        """The loss by training step (a call of N steps: at its last, (call + 1) x N - 1)."""
        n = self.steps_per_call
        return {(p.step + 1) * n - 1 if n > 1 else p.step: p.loss for p in self.steps
                if p.loss is not None}

    def median_step_s(self, warmup: int = 0) -> float | None:
        times = self.step_times(warmup)
        return statistics.median(times) if times else None


PART_NAMES = ("compute", "input", "communication", "host", "idle")


@dataclass(frozen=True)
class DeviceParts:
    """One device's mean profiled step, split by where its time went (seconds; the parts
    add up to ``period_s``; gpudiag.readers.stepbreakdown)."""

    device: str
    period_s: float
    compute_s: float
    input_s: float
    communication_s: float
    host_s: float
    idle_s: float
    host_between_calls_s: float = 0.0

    def part(self, name: str) -> float:
        value: float = getattr(self, f"{name}_s")
        return value

    @classmethod
    def from_dict(cls, device: str, d: Mapping[str, Any]) -> DeviceParts:
        def part(name: str) -> float:
            return float(d.get(f"{name}_s") or 0.0)
        return cls(device, float(d["period_s"]), part("compute"), part("input"),
                   part("communication"), part("host"), part("idle"),
                   part("host_between_calls"))


@dataclass(frozen=True)
class StepBreakdown:
    """What one bottleneck finding measured: the judged step, each device's parts, the
    causes (the first is the bottleneck) and the what-if prediction when it has one."""

    finding_id: str
    status: str
    step_s: float | None
    devices: dict[str, DeviceParts]
    causes: tuple[str, ...]
    trace: str | None
    predicted: dict[str, Any] | None = None
    # the program's tf.data calls the finding recorded (method, args, where): which of the
    # pipeline's fixes a run made (gpudiag.verdicts.whatif.changes_made)
    dataset_calls: tuple[dict[str, Any], ...] = ()

    @property
    def bottleneck(self) -> str | None:
        return self.causes[0] if self.causes else None


@dataclass(frozen=True)
class Live:
    """A run still running: what its live files say so far."""

    report_mtime_unix_s: float  # when report.json was last rewritten
    event_files: tuple[Path, ...]  # the hooks' events-<pid>.jsonl (run)
    tb_event_files: tuple[Path, ...]  # the program's TensorBoard files written as it runs
    findings_so_far: int


@dataclass(frozen=True)
class Run:
    """One run directory, read. ``report_json``: report.json as it is on disk (the plain
    data the schema describes); ``report``: the same, typed."""

    path: Path
    command: str
    status: RunStatus
    started_at: str
    finished_at: str | None
    schema_version: int
    report: Report
    report_json: dict[str, Any]
    children: dict[str, ChildFiles]
    traces: tuple[Path, ...]
    live: Live | None
    _loops: Callable[[Run], dict[str, Loop]] = field(repr=False, compare=False)

    @functools.cached_property
    def loops(self) -> dict[str, Loop]:
        """The step series, by loop name (read from the TensorBoard files on first use)."""
        return self._loops(self)

    @functools.cached_property
    def breakdown(self) -> tuple[StepBreakdown, ...]:
        """Per bottleneck finding (run, explain, scaling), each device's step parts."""
        return breakdowns(self.report)

    def finding(self, finding_id: str) -> dict[str, Any] | None:
        """A finding as plain data (None: the report has none of that id)."""
        for f in self.report.findings:
            if f.id == finding_id:
                return f.to_dict()
        return None


#: The findings whose evidence holds a per-device step breakdown (``parts_s``).
BREAKDOWN_FINDING_PREFIXES = ("run.bottleneck", "explain.bottleneck", "scaling.bottleneck",
                              "cluster.bottleneck")


def breakdowns(report: Report) -> tuple[StepBreakdown, ...]:
    """Each bottleneck finding's per-device parts (gpudiag.verdicts.bottleneck's evidence)."""
    out = []
    for f in report.findings:
        if not f.id.startswith(BREAKDOWN_FINDING_PREFIXES):
            continue
        ev = f.evidence
        parts = ev.get("parts_s") or {}
        devices = {d: DeviceParts.from_dict(d, p) for d, p in parts.items()
                   if isinstance(p, dict) and p.get("period_s") is not None}
        step = ev.get("step_s")
        out.append(StepBreakdown(f.id, f.status, float(step) if step is not None else None,
                                 devices, tuple(ev.get("causes") or ()), ev.get("trace"),
                                 ev.get("predicted"),
                                 tuple(c for c in ev.get("dataset_calls") or ()
                                       if isinstance(c, dict))))
    return tuple(out)
