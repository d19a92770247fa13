"""The typed view of one run directory (gpudiag.rundir.load_run builds it).

A ``Run`` is read from what a command wrote (gpudiag.layout names every file): the report
(gpudiag.report.Report), each child process's files, the step series of each training loop
(its TensorBoard scalars), the findings' typed evidence (gpudiag.layout.evidence: ``Run.evidence``;
``Run.breakdown``, the bottleneck findings' per-device step parts), the
profiler traces and, while the command still runs, what its live files say. The step
series are read when first asked for (``Run.loops``), so listing a logdir stays cheap.
"""

from __future__ import annotations

import functools
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gpudiag.layout.evidence import (
    STEP_PARTS,
    Bottleneck,
    DeviceParts,
    Evidence,
    Learning,
    decode,
)
from gpudiag.report import Finding, Report

RunStatus = Literal["complete", "interrupted", "running", "failed"]
#: A step time gpudiag computes with: a nanosecond to a million seconds (NaN is outside).
STEP_S_RANGE = (1e-9, 1e6)


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
        """Seconds per step, the first ``warmup`` steps left out, and the impossible ones
        (:meth:`impossible`)."""
        return [p.step_s for p in self.steps[warmup:] if p.step_s is not None
                and STEP_S_RANGE[0] <= p.step_s <= STEP_S_RANGE[1]]

    def impossible(self) -> int:
        """How many recorded step times are impossible: negative, zero, not finite, or
        outside STEP_S_RANGE (numbers too large to compute with: 1e308)."""
        return sum(1 for p in self.steps if p.step_s is not None
                   and not STEP_S_RANGE[0] <= p.step_s <= STEP_S_RANGE[1])

    def losses(self) -> dict[int, float]:
        """The loss by training step (a call of N steps: at its last, (call + 1) x N - 1)."""
        n = self.steps_per_call
        return {(p.step + 1) * n - 1 if n > 1 else p.step: p.loss for p in self.steps
                if p.loss is not None}

    def median_step_s(self, warmup: int = 0) -> float | None:
        times = self.step_times(warmup)
        return statistics.median(times) if times else None


#: What a Keras fit's recorded loss is, in the words every face shows beside its curve.
RUNNING_MEAN = ("each point is Keras's running mean of its epoch so far: it starts again "
                "at each epoch (marked), it is not an event in training")

PART_NAMES = STEP_PARTS  # the step's parts, declared once in gpudiag.layout.evidence


@dataclass(frozen=True)
class StepBreakdown:
    """What one bottleneck finding measured (its typed evidence, gpudiag.layout.evidence.
    Bottleneck): the judged step, each device's parts, the causes (the first is the
    bottleneck) and the what-if prediction when it has one."""

    finding_id: str
    status: str
    evidence: Bottleneck

    @property
    def step_s(self) -> float | None:
        return self.evidence.step_s

    @property
    def devices(self) -> dict[str, DeviceParts]:
        return self.evidence.devices

    @property
    def causes(self) -> tuple[str, ...]:
        return self.evidence.causes

    @property
    def trace(self) -> str | None:
        return self.evidence.trace

    @property
    def predicted(self) -> dict[str, Any] | None:
        return self.evidence.predicted

    @property
    def dataset_calls(self) -> tuple[dict[str, Any], ...]:
        """The program's tf.data calls the finding recorded (method, args, where): which
        of the pipeline's fixes a run made (gpudiag.verdicts.whatif_input.changes_made)."""
        return self.evidence.dataset_calls

    @property
    def bottleneck(self) -> str | None:
        return self.evidence.bottleneck


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
    # each finding's typed evidence, in the report's order (load_run and unsaved_run
    # decode it: one per finding)
    typed_evidence: tuple[Evidence | None, ...] = field(default=(), repr=False)

    @functools.cached_property
    def loops(self) -> dict[str, Loop]:
        """The step series, by loop name (read from the TensorBoard files on first use)."""
        return self._loops(self)

    @functools.cached_property
    def breakdown(self) -> tuple[StepBreakdown, ...]:
        """Per bottleneck finding (run, explain, scaling), each device's step parts."""
        return tuple(StepBreakdown(f.id, f.status, e)
                     for f, e in zip(self.report.findings, self.typed_evidence, strict=True)
                     if isinstance(e, Bottleneck))

    def evidence(self, finding: Finding | str) -> Evidence | None:
        """A finding's typed evidence (gpudiag.layout.evidence; ``finding``: it, or its id), as
        load_run decoded it: None when its family declares no evidence type or the
        report has no such finding."""
        for f, e in zip(self.report.findings, self.typed_evidence, strict=True):
            if f is finding or f.id == finding:
                return e
        return None

    def loss_marks(self, loop: str) -> tuple[list[int], bool]:
        """The training steps of ``loop``'s losses (as Loop.losses numbers them) where an
        epoch after the first began, and whether each loss is Keras's running mean over its
        epoch so far, as its learning finding recorded them ([], False: not recorded)."""
        n = self.loops[loop].steps_per_call if loop in self.loops else 1
        for e in self.typed_evidence:
            for row in e.loops if isinstance(e, Learning) else ():
                if row.series == loop:
                    return [i * n for i in row.epoch_starts], row.running_mean
        return [], False

    def finding(self, finding_id: str) -> dict[str, Any] | None:
        """A finding as plain data (None: the report has none of that id)."""
        for f in self.report.findings:
            if f.id == finding_id:
                return f.to_dict()
        return None


def typed_evidence(report: Report) -> tuple[Evidence | None, ...]:
    """Each finding's typed evidence (gpudiag.layout.evidence.decode), in the report's order; a
    ValueError naming the finding and the field where one does not fit."""
    return tuple(decode(f.id, f.evidence) for f in report.findings)
