"""What a multi-worker run was asked to do, its command-line options, checked once.

`gpudiag scaling --workers N` and `gpudiag worker` share these. The Typer options are
defined here (the command line only lists them) so that every cluster default lives in one place:
ClusterOptions. ``check`` rejects bad combinations with one line (exit 2) before any
run directory exists.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

import typer

from gpudiag.cluster.clusterrun import Fault
from gpudiag.errors import UsageError
from gpudiag.records import cluster as records
from gpudiag.records.training import Workload
from gpudiag.scaling.options import check_steps

MAX_WORKERS = 16
MODE_CHOICES = {"sync": ("sync",), "ps": ("ps",), "both": ("sync", "ps")}
FAULT_KINDS = ("kill", "absent")
_FAULT_RE = re.compile(r"^(?P<kind>\w+):(?P<task>(?:chief|worker|ps)-\d+)(?:@(?P<step>\d+))?$")


@dataclass(frozen=True)
class ClusterOptions:
    """Everything a local multi-worker run was asked (``scaling --workers``)."""

    workload: Workload = field(default_factory=Workload)
    workers: int = 2
    modes: tuple[str, ...] = ("sync",)
    n_ps: int = 1
    batch_factor: int = 4  # the second batch per worker = batch x this; 1: one batch only
    form_timeout_s: float = 60.0
    collective_timeout_s: float = records.DEFAULT_COLLECTIVE_TIMEOUT_S
    timeout_s: float = 300.0  # per cluster configuration, every attempt included
    restarts: int = 0
    backup_every: int = records.DEFAULT_BACKUP_EVERY
    fault: Fault | None = None

    @property
    def grace_s(self) -> float:
        """How long the others get to end by themselves after a task failed: TensorFlow's
        heartbeat (about 10 s) or the collective timeout, whichever comes first, plus room."""
        return min(self.collective_timeout_s, 15.0) + 10.0

    @property
    def batches(self) -> list[int]:
        b = self.workload.batch_per_device
        return [b] if self.batch_factor <= 1 else [b, b * self.batch_factor]

    def worker_counts(self) -> list[int]:
        return [1, self.workers] if self.workers > 1 else [1]

    def to_dict(self) -> dict[str, Any]:
        fault = self.fault
        return {"workload": self.workload.to_dict(), "workers": self.workers,
                "modes": list(self.modes), "n_ps": self.n_ps, "batch_factor": self.batch_factor,
                "form_timeout_s": self.form_timeout_s,
                "collective_timeout_s": self.collective_timeout_s, "timeout_s": self.timeout_s,
                "restarts": self.restarts, "backup_every": self.backup_every,
                "fault": None if fault is None else {"kind": fault.kind, "task": fault.task,
                                                     "at_step": fault.at_step}}


def parse_mode(text: str) -> tuple[str, ...]:
    if text not in MODE_CHOICES:
        raise UsageError(f"--mode {text!r} is not one of: {', '.join(MODE_CHOICES)}")
    return MODE_CHOICES[text]


def parse_fault(text: str | None) -> Fault | None:
    """``kill:worker-1@5`` (SIGKILL worker 1 at step 5) or ``absent:worker-1``."""
    if text is None:
        return None
    m = _FAULT_RE.match(text.strip())
    if m is None or m.group("kind") not in FAULT_KINDS:
        raise UsageError(f"--fault {text!r}: write kill:TASK@STEP (kill:worker-1@5) or "
                         "absent:TASK (absent:worker-1)")
    kind, step = m.group("kind"), m.group("step")
    if kind == "kill" and step is None:
        raise UsageError(f"--fault {text!r}: kill needs the step, e.g. kill:worker-1@5")
    if kind == "absent" and step is not None:
        raise UsageError(f"--fault {text!r}: absent takes no step")
    return Fault(kind, m.group("task"), int(step) if step else None)


def check(options: ClusterOptions) -> None:
    """One-line UsageError for anything a cluster run cannot do."""
    w = options.workload
    if not 1 <= options.workers <= MAX_WORKERS:
        raise UsageError(f"--workers must be 1..{MAX_WORKERS}, got {options.workers}")
    if w.data is not None:
        raise UsageError("--data is not supported with --workers: each worker generates "
                         "the synthetic set itself (gpudiag/train/cluster_data.py)")
    check_steps(w)
    if options.restarts < 0:
        raise UsageError("--restarts must be >= 0")
    fault = options.fault
    if fault is not None:
        job, _, index = fault.task.partition("-")
        count = {"worker": options.workers, "ps": options.n_ps if "ps" in options.modes else 0,
                 "chief": 1 if "ps" in options.modes else 0}[job]
        if int(index) >= count:
            raise UsageError(f"--fault: there is no {fault.task} in a local cluster of "
                             f"{options.workers} worker(s)"
                             + (" and 1 ps" if "ps" in options.modes else ""))
        if fault.kind == "kill" and not 1 <= (fault.at_step or 0) <= w.steps:
            raise UsageError(f"--fault: step {fault.at_step} is not in 1..{w.steps}")


def from_cli(given: ClusterOptions, *, workers: int | None, mode: str | None,
             fault: str | None, not_with_workers: dict[str, object]) -> ClusterOptions:
    """`scaling --workers`'s options, checked: ``given`` holds the options Typer has already
    typed (workload, batch factor, restarts, timeouts), ``workers``, ``mode`` and ``fault``
    are as given on the command line; ``not_with_workers`` maps the scaling options that
    make no sense for a cluster to their values (None: not given)."""
    if workers is None:
        raise UsageError("--mode needs --workers N (a local cluster of N worker processes)")
    named = [name for name, value in not_with_workers.items() if value is not None]
    if named:
        raise UsageError(f"{named[0]} does not apply to --workers (each worker uses this "
                         "machine's devices as TensorFlow finds them)")
    options = replace(given, workers=workers, modes=parse_mode(mode or "sync"),
                      fault=parse_fault(fault))
    check(options)
    return options


# ------------------------------------------------------------------- Typer options
# Listed by gpudiag/cli/scaling_cli.py for `scaling` (cluster runs) and `worker`.

WorkersOpt = typer.Option(None, "--workers", min=1, max=MAX_WORKERS, help="Run the probe on "
                          "a local cluster of N worker processes (TF_CONFIG on 127.0.0.1), "
                          "1 worker beside N; see docs/cluster.md.")
ModeOpt = typer.Option(None, "--mode", help="With --workers: sync "
                       "(MultiWorkerMirroredStrategy), ps (ParameterServerStrategy with a "
                       "coordinator and 1 parameter server) or both (default: sync).")
BatchFactorOpt = typer.Option(ClusterOptions.batch_factor, "--batch-factor", min=1, max=64,
                              help="With --workers: also run at this many times the batch "
                              "per worker (1: only one batch).")
RestartsOpt = typer.Option(ClusterOptions.restarts, "--restarts", min=0, max=10,
                           help="Restart a cluster that lost a task this many times; it "
                           "resumes from its backups.")
FaultOpt = typer.Option(None, "--fault", help="A fault drill: kill:worker-1@5 kills worker 1 "
                        "(SIGKILL) at step 5; absent:worker-1 never starts it.")
FormTimeoutOpt = typer.Option(ClusterOptions.form_timeout_s, "--form-timeout", min=1.0,
                              max=3600.0, help="Seconds the cluster may take to form.")
CollectiveTimeoutOpt = typer.Option(ClusterOptions.collective_timeout_s,
                                    "--collective-timeout", min=1.0, max=3600.0,
                                    help="CommunicationOptions(timeout_seconds): a collective "
                                    "waiting longer for a peer fails.")
SlurmOpt = typer.Option(False, "--slurm", help="Read the cluster from this Slurm job step "
                        "(TensorFlow's SlurmClusterResolver) instead of TF_CONFIG.")
SlurmPortBaseOpt = typer.Option(8888, "--slurm-port-base", min=1024, max=65000,
                                help="--slurm: the first port of each node's tasks.")
WorkerModeOpt = typer.Option("sync", "--mode", help="sync (MultiWorkerMirroredStrategy) or "
                             "ps (ParameterServerStrategy: the chief coordinates).")
