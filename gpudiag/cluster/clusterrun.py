"""A cluster configuration's run as records (gpudiag.cluster.supervise runs it): what to run
(TaskSpec, a Fault drill, the Limits), how each task process of each attempt went
(TaskOutcome) and the configuration as a whole (ClusterRun, one of OUTCOMES), in plain data
for the report (describe).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.records.cluster import WorkerConfig, WorkerResult

OUTCOMES = ("complete", "never-formed", "task-failed", "timeout")



@dataclass(frozen=True)
class TaskSpec:
    """One task to run: who it is, its TF_CONFIG (JSON) and its config."""

    name: str  # layout.task_name
    task_type: str
    index: int
    role: str  # records.ROLES
    tf_config: str
    config: WorkerConfig
    env: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Fault:
    """A fault drill: ``kill`` SIGKILLs ``task`` once it reports step ``at_step``;
    ``absent`` never starts it."""

    kind: str
    task: str
    at_step: int | None = None


@dataclass(frozen=True)
class Limits:
    form_timeout_s: float
    timeout_s: float
    grace_s: float
    restarts: int = 0


@dataclass(frozen=True)
class TaskOutcome:
    """How one task process of one attempt went."""

    name: str
    task_type: str
    index: int
    role: str
    attempt: int
    started: bool
    formed: bool
    last_step: int | None  # the last GPUDIAG-STEP it printed
    resumed_from: int | None
    returncode: int | None
    ended_by: str  # "exit" | "stopped" | "killed-by-drill" | "not-started"
    exit_text: str
    error_type: str | None
    error: str | None
    result: WorkerResult | None
    stderr_tail: list[str]
    dir: str
    duration_s: float
    ended_at_s: float | None  # when it ended, seconds after the configuration started
    pid: int | None  # its process (and process group) id
    listening: list[str] | None  # what it listened on once formed (None: unknown)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and self.ended_by == "exit"

    def stderr_text(self) -> str:
        try:
            return (Path(self.dir) / layout.STDERR_TXT).read_text(encoding="utf-8",
                                                                   errors="replace")
        except OSError:
            return ""


@dataclass(frozen=True)
class ClusterRun:
    """One cluster configuration, every attempt."""

    name: str
    mode: str
    n_workers: int
    batch_per_worker: int
    outcome: str  # one of OUTCOMES
    attempts: list[list[TaskOutcome]]
    failed: list[str]  # tasks that failed first, per attempt in order
    restarts_used: int
    wall_s: float

    @property
    def final(self) -> list[TaskOutcome]:
        return self.attempts[-1] if self.attempts else []

    def outcomes(self) -> list[TaskOutcome]:
        return [t for attempt in self.attempts for t in attempt]

    @property
    def chief(self) -> TaskOutcome | None:
        """The final attempt's chief (sync: chief, else worker 0; ps: the coordinator)."""
        tasks = {t.name: t for t in self.final}
        return tasks.get("chief-0") or tasks.get("worker-0")


def describe(run: ClusterRun) -> dict[str, Any]:
    """Plain data for the report: every task of every attempt."""
    return {
        "config": run.name, "mode": run.mode, "n_workers": run.n_workers,
        "batch_per_worker": run.batch_per_worker, "outcome": run.outcome,
        "failed": run.failed, "restarts_used": run.restarts_used, "wall_s": round(run.wall_s, 3),
        "tasks": [{"task": t.name, "attempt": t.attempt, "role": t.role, "started": t.started,
                   "formed": t.formed, "last_step": t.last_step, "resumed_from": t.resumed_from,
                   "ended": t.ended_by, "exit": t.exit_text, "error_type": t.error_type,
                   "error": t.error, "listening": t.listening, "dir": t.dir, "pid": t.pid,
                   "duration_s": round(t.duration_s, 3)} for t in run.outcomes()],
    }
