"""What a cluster task's child is asked and what it answers, as typed, TF-free records.

The parent (`gpudiag scaling --workers`, `gpudiag worker`) writes a ``WorkerConfig`` to
each task's config.json and the task's TF_CONFIG into its environment; the child
(gpudiag/probes/cluster.py) answers with a ``WorkerResult``. A task is one of three
roles: a ``trainer`` (sync mode: every chief and worker task trains under
MultiWorkerMirroredStrategy), the ``coordinator`` (ps mode: the chief, which runs the
training loop with a ClusterCoordinator) or a ``server`` (ps mode: ps and worker tasks,
which run a TensorFlow server and execute what the coordinator sends them).

``WorkerStats`` is what one worker measured on itself: in sync mode every worker times
its own steps and the chief receives everyone's through an all-gather over the cluster;
in ps mode each step the coordinator schedules runs on one worker, which stamps its
start and end with its own clock (``tf.timestamp``) and returns its index.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from gpudiag.records.training import Plain, Workload, _build

ROLES = ("trainer", "coordinator", "server")
DEFAULT_BACKUP_EVERY = 25
DEFAULT_COLLECTIVE_TIMEOUT_S = 30.0
DEFAULT_SERVER_WAIT_S = 120.0


def role_of(mode: str, task_type: str) -> str:
    """sync: every task trains; ps: the chief coordinates, ps and worker tasks serve."""
    if mode == "sync":
        return "trainer"
    return "coordinator" if task_type == "chief" else "server"


@dataclass(frozen=True)
class WorkerConfig(Plain):
    """One cluster task's input (its TF_CONFIG comes in the environment)."""

    mode: str  # "sync" (MultiWorkerMirroredStrategy) or "ps" (ParameterServerStrategy)
    workload: Workload  # batch_per_device is the batch per worker (per replica)
    logdir: str  # this task's TensorBoard run
    backup_dir: str | None = None  # resume checkpoints; None: no backups
    backup_every: int = DEFAULT_BACKUP_EVERY  # steps between backups
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S  # CommunicationOptions
    server_wait_s: float = DEFAULT_SERVER_WAIT_S  # a ps-mode server ends when the chief
    # has not answered for this long (never came up, or gone)
    n_eval: int = 1024  # held-out examples the chief evaluates at the end
    progress: bool = True  # layout.step_line / cluster_line on stdout

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerConfig:
        return _build(cls, data, workload=Workload.from_dict)


@dataclass(frozen=True)
class WorkerStats(Plain):
    """One worker's own measurements (steps are 1-based, absolute across restarts)."""

    task: str  # "worker-1"
    steps: int  # steps it ran in this process (ps: steps that ran on it)
    first_step: int  # the step it started after: 0, or the step a backup restored
    last_step: int  # the last step it finished
    batch: int  # examples per step on this worker
    timed_steps: int  # steps behind the rates (warm-up and profiled steps left out)
    examples_per_s: float | None  # batch x timed steps / their time, on its own clock
    step_s_median: float | None
    communication_s_per_step: float | None = None  # collective ops in its trace (sync)


def _stats_list(values: Any) -> list[WorkerStats]:
    return [WorkerStats.from_dict(v) for v in values]


@dataclass(frozen=True)
class WorkerResult(Plain):
    """What one cluster task's child returns."""

    mode: str
    role: str  # one of ROLES
    task: str
    is_chief: bool
    cluster: dict[str, list[str]]
    num_workers: int  # tasks that compute steps (sync: chief + workers; ps: workers)
    devices: list[str]  # this task's replica devices (trainer), [] otherwise
    device_kind: str  # "gpu" or "cpu"
    global_batch: int  # examples per step over the cluster (ps: per scheduled step)
    resumed_from: int  # the step a backup restored; 0: a fresh start
    own: WorkerStats | None  # a trainer's own measurements
    workers: list[WorkerStats]  # every worker's: sync (all-gathered), ps coordinator
    losses: list[float | None]  # per step this process ran (coordinator: in step order)
    final_loss: float | None  # mean over the last steps
    final_accuracy: float | None
    eval_loss: float | None  # chief / coordinator: the held-out set at the end
    eval_accuracy: float | None
    coordinator_examples_per_s: float | None = None  # ps: steps fetched per second x batch
    profile_dir: str | None = None
    backups_saved: int = 0
    lost_outputs: int = 0  # ps: steps that ran but whose outputs died with their worker
    served_s: float | None = None  # a server: how long it served
    wall_s: float = 0.0
    notes: list[str] = field(default_factory=list)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> WorkerResult:
        return _build(cls, data, own=lambda v: None if v is None else WorkerStats.from_dict(v),
                      workers=_stats_list)

    @property
    def total_examples_per_s(self) -> float | None:
        """The sum of what every worker measured (None unless every one measured)."""
        rates = [w.examples_per_s for w in self.workers]
        if not rates or any(r is None for r in rates):
            return None
        return float(sum(r for r in rates if r is not None))
