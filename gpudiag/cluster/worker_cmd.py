"""`gpudiag worker`: this machine's task of a real multi-machine cluster.

Run once per task, on its machine, each with its own TF_CONFIG (or inside a Slurm
allocation with ``--slurm``: TensorFlow's SlurmClusterResolver, run in a short child,
turns the allocation into the TF_CONFIG). The TF_CONFIG is checked before anything
starts (gpudiag.records.tfconfig: exit 2 with one line). Then the task runs in one
supervised child (gpudiag.cluster.supervise), the probe as in `scaling --workers`:

- sync (MultiWorkerMirroredStrategy): every task trains; at the end the workers
  exchange their own measurements (an all-gather), so the chief's report has every
  worker's examples/s and their sum, and its TensorBoard run the combined scalars;
- ps: the chief coordinates and writes the report; ps and worker tasks serve until the
  chief is gone.

A task whose cluster does not form within ``--form-timeout`` is stopped and the report
says who it was waiting for; one stopped by the user (Ctrl-C, SIGTERM, SIGHUP) says when:
while it waited for the cluster, or at which step. Backups go to
``<logdir>/worker-backup/<task>/``: a task restarted with the same --logdir resumes with
the others (docs/cluster.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag import layout, nvml
from gpudiag.cluster import judge
from gpudiag.cluster.clusterrun import ClusterRun, Limits, TaskOutcome, TaskSpec
from gpudiag.cluster.supervise import run_cluster
from gpudiag.errors import EnvironmentBroken, UsageError, signum_of
from gpudiag.records import tfconfig
from gpudiag.records.cluster import (
    DEFAULT_BACKUP_EVERY,
    DEFAULT_COLLECTIVE_TIMEOUT_S,
    WorkerConfig,
    role_of,
)
from gpudiag.records.training import Workload
from gpudiag.report import Finding
from gpudiag.scaling.options import check_steps
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import cluster as verdicts
from gpudiag.verdicts import gpu_use as gpu_verdicts
from gpudiag.verdicts.common import title

DEFAULT_SLURM_PORT_BASE = 8888  # SlurmClusterResolver's default
SLURM_VARS = ("SLURM_PROCID", "SLURM_STEP_NUM_TASKS", "SLURM_STEP_NODELIST",
              "SLURM_STEP_TASKS_PER_NODE")


@dataclass(frozen=True)
class WorkerOptions:
    workload: Workload = field(default_factory=Workload)
    mode: str = "sync"
    slurm: bool = False
    slurm_port_base: int = DEFAULT_SLURM_PORT_BASE
    n_ps: int = 1  # --slurm --mode ps: the parameter servers among the tasks
    form_timeout_s: float = 120.0
    collective_timeout_s: float = DEFAULT_COLLECTIVE_TIMEOUT_S
    timeout_s: float = 600.0
    backup_every: int = DEFAULT_BACKUP_EVERY

    def limits(self) -> Limits:
        return Limits(form_timeout_s=self.form_timeout_s, timeout_s=self.timeout_s,
                      grace_s=0.0, restarts=0)


def check(options: WorkerOptions) -> None:
    w = options.workload
    if options.mode not in tfconfig.MODES:
        raise UsageError(f"--mode {options.mode!r} is not one of: {', '.join(tfconfig.MODES)}")
    if w.data is not None:
        raise UsageError("--data is not supported by gpudiag worker: each worker generates "
                         "the synthetic set itself")
    check_steps(w)
    if options.slurm:
        missing = [v for v in SLURM_VARS if v not in os.environ]
        if missing:
            raise UsageError(f"--slurm: {missing[0]} is not set: run gpudiag worker inside "
                             "a Slurm job step (srun)")


def slurm_tf_config(options: WorkerOptions) -> tuple[str, dict[str, str]]:
    """TensorFlow's SlurmClusterResolver, in a child: (TF_CONFIG text, extra env)."""
    from gpudiag.procs.runner import run_child

    with tempfile.TemporaryDirectory(prefix="gpudiag-slurm-") as tmp:
        child = run_child("slurm", {"port_base": options.slurm_port_base, "mode": options.mode,
                                    "n_ps": options.n_ps}, run_dir=Path(tmp), name="slurm",
                          timeout_s=120.0)
    if not child.ok or child.result is None:
        if child.error_type in ("RuntimeError", "ValueError"):
            raise UsageError(f"--slurm: TensorFlow's SlurmClusterResolver: {child.error}")
        raise EnvironmentBroken(f"--slurm: resolving the Slurm allocation failed: {child.error}")
    env = {"CUDA_VISIBLE_DEVICES": child.result["cuda_visible_devices"]} \
        if child.result.get("cuda_visible_devices") is not None else {}
    return json.dumps(child.result["tf_config"]), env


def resolve(options: WorkerOptions) -> tuple[tfconfig.TfConfig, dict[str, str]]:
    """This task's checked TF_CONFIG (UsageError: exit 2) and extra environment."""
    check(options)
    if options.slurm:
        text, env = slurm_tf_config(options)
        return tfconfig.parse(text, mode=options.mode), env
    return tfconfig.parse(os.environ.get(tfconfig.ENV_VAR), mode=options.mode), {}


def spec_of(session: RunSession, options: WorkerOptions, tfc: tfconfig.TfConfig,
            env: dict[str, str], logdir: Path) -> TaskSpec:
    role = role_of(options.mode, tfc.task_type)
    config = WorkerConfig(
        mode=options.mode, workload=options.workload, logdir=str(session.run_dir / tfc.task),
        backup_dir=str(logdir / layout.WORKER_BACKUP_DIR / tfc.task),
        backup_every=options.backup_every, collective_timeout_s=options.collective_timeout_s,
        server_wait_s=options.form_timeout_s)
    return TaskSpec(tfc.task, tfc.task_type, tfc.task_index, role, tfc.to_json(), config, env)


def run(session: RunSession, options: WorkerOptions, tfc: tfconfig.TfConfig,
        env: dict[str, str], *, logdir: Path,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui) -> None:
    """Run this task and judge it; see the module docstring."""
    session.set("cluster_task", {"tf_config": tfc.to_dict(), "task": tfc.task,
                                 "mode": options.mode, "slurm": options.slurm,
                                 "coordination_leader": tfc.coordination_leader})
    spec = spec_of(session, options, tfc, env, logdir)
    reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    sampler = (None if isinstance(backend, nvml.NvmlUnavailable)
               else nvml.Sampler(backend).start())
    steps = [0]  # the latest step the task reached

    def on_step(task: str, step: int) -> None:
        steps[0] = max(steps[0], step)
        if step == 1 or step % 25 == 0 or step == options.workload.steps:
            ui.say(f"{task}: step {step}/{options.workload.steps}")

    started = time.monotonic()
    try:  # from the line that says it waits, a stop is this task's finding
        ui.say(f"{tfc.task} ({spec.role}, {options.mode}) at {tfc.address}; waiting for the "
               f"cluster (coordination leader {tfc.coordination_leader})")
        result = run_cluster(session.run_dir, options.mode, options.mode, [spec],
                             options.limits(), on_step=on_step)
    except KeyboardInterrupt as exc:  # the task is stopped (run_cluster's own finally)
        session.add(stopped(tfc, signal.Signals(signum_of(exc)).name, steps[0],
                            options.workload.steps, time.monotonic() - started))
        raise
    finally:
        sampling = sampler.stop() if sampler is not None else None
    judge_task(session, options, tfc, result, sampling, reason, ui, logdir)


def stopped(tfc: tfconfig.TfConfig, signal_name: str, step: int, steps: int,
            after_s: float) -> Finding:
    """cluster.run.<task> of a task the user stopped: when, and nothing judged."""
    leader = tfc.coordination_leader
    if step:
        when = f"at step {step} of {steps}"
    elif leader == tfc.task:
        when = "while it waited for the cluster's other tasks to join (it leads the cluster)"
    else:
        when = (f"while it waited for the cluster to form (its leader {leader} at "
                f"{_leader_address(tfc)})")
    message = f"{tfc.task}: stopped by {signal_name} after {after_s:.1f} s, {when}"
    return Finding(f"cluster.run.{tfc.task}", "skip", message,
                   {"signal": signal_name, "step": step, "steps": steps,
                    "after_s": after_s, "leader": leader},
                   advice="gpudiag was stopped before this task ended, so nothing of it is "
                   "judged; run it again and let it finish (or give it --form-timeout to "
                   "bound the wait for the cluster).",
                   title=f"the task was stopped by {signal_name} before it ended")


def _leader_address(tfc: tfconfig.TfConfig) -> str:
    """The address of the task that leads the cluster (``worker-0``: the cluster's first
    worker's)."""
    job, _, index = tfc.coordination_leader.rpartition("-")
    return tfc.cluster[job][int(index)]


def _not_formed(tfc: tfconfig.TfConfig, row: dict[str, Any], form_timeout_s: float,
                task: TaskOutcome | None) -> Finding:
    leader = tfc.coordination_leader
    address = _leader_address(tfc)
    evidence = {**row, "leader": leader, "leader_address": address}
    if task is not None and task.ended_by == "exit":  # not stopped: it ended by itself
        after = "" if task.ended_at_s is None else f" after {task.ended_at_s:.1f} s"
        why = (f"{task.error_type}: {task.error}" if task.error_type and task.error
               else task.exit_text)
        return Finding(f"cluster.run.{tfc.task}", "fail",
                       f"{tfc.task}: the task ended by itself{after}, before the cluster "
                       f"formed ({why})", evidence, advice=verdicts.NOT_FORMED_ADVICE,
                       title="the task ended before the cluster formed")
    if leader == tfc.task:
        waiting = row.get("stragglers") or []
        who = (f"this task leads the cluster and was still waiting for {', '.join(waiting)}"
               if waiting else "this task leads the cluster and not every task connected")
    else:
        who = (f"this task ({tfc.task} at {tfc.address}) got no answer from the cluster's "
               f"leader {leader} at {address}, or not every task joined")
    return Finding(f"cluster.run.{tfc.task}", "fail",
                   f"{tfc.task}: the cluster did not form within {form_timeout_s:g} s: {who}; "
                   "the task was stopped", evidence,
                   advice=verdicts.NOT_FORMED_ADVICE,
                   title=f"the cluster did not form within {form_timeout_s:g} s")


def judge_task(session: RunSession, options: WorkerOptions, tfc: tfconfig.TfConfig,
               run: ClusterRun, sampling: nvml.SamplingResult | None, reason: str | None,
               ui: Ui, logdir: Path) -> None:
    hosts = {a.rpartition(":")[0] for a in tfc.addresses}
    shared = all(tfconfig.is_loopback_address(a) for a in tfc.addresses) or len(hosts) == 1
    row = {**judge.config_row(run, options.limits(), shared_machine=shared), "config": tfc.task,
           "n_workers": len(tfc.training_tasks) if options.mode == "sync"
           else len(tfc.cluster["worker"])}
    task = run.final[0] if run.final else None
    if run.outcome == "never-formed":
        session.add(_not_formed(tfc, row, options.form_timeout_s, task))
    elif task is not None and task.role == "server" and task.ended_by == "exit" and task.ok:
        served = task.result.served_s if task.result else None
        session.add(Finding(f"cluster.run.{tfc.task}", "ok",
                            f"{tfc.task} served the coordinator"
                            + (f" for {served:.1f} s" if served else "")
                            + " and ended when the chief was gone", row,
                            title=title(f"{tfc.task} served the coordinator until the chief "
                                        "left", "served the coordinator until the chief left")))
    else:
        session.add(verdicts.cluster_run(row))
    if row["workers"]:
        session.add(verdicts.cluster_scaling(options.mode, row["batch_per_worker"], [row]))
    elif task is not None and task.result is not None and task.result.own is not None:
        own = task.result.own
        rate = "n/a" if own.examples_per_s is None else f"{own.examples_per_s:,.0f}"
        step = "n/a" if own.step_s_median is None else f"{own.step_s_median * 1e3:.1f} ms"
        session.add(Finding(f"cluster.worker.{tfc.task}", "ok",
                            f"{tfc.task} measured {rate} examples/s on itself (batch "
                            f"{own.batch}, median step {step}); the chief's report "
                            f"({tfc.training_tasks[0][0]}-0) has every worker's and their sum",
                            own.to_dict(),
                            title=f"this worker measured {rate} examples/s, median step {step}"))
    if sampling is not None:
        nvml.write_scalars(sampling, session.run_dir / layout.NVML_TB_RUN / tfc.task)
        session.add(gpu_verdicts.every_gpu_used(sampling.summaries,
                                                nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT,
                                                check_id=f"cluster.nvml.{tfc.task}"))
    elif reason is not None:
        session.add(gpu_verdicts.every_gpu_used([], nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT,
                                                nvml_unavailable_reason=reason,
                                                check_id="cluster.nvml"))
    done = [run.name] if run.outcome == "complete" else []
    for finding in verdicts.tf_messages(judge.seen_messages([run]),
                                        never_formed=run.outcome == "never-formed",
                                        completed=done):
        session.add(finding)
    loopback = all(tfconfig.is_loopback_address(a) for a in tfc.addresses)
    session.add(verdicts.listening(row["tasks"], tf_config_loopback=loopback))
    session.set("cluster", {"rows": [row], "configs": {tfc.task: judge.run_data(run)}})
    with contextlib.suppress(OSError):  # empty once every task's backup was removed
        (logdir / layout.WORKER_BACKUP_DIR).rmdir()
    if row["workers"]:
        judge.write_tb(session.run_dir, [row])
        ui.show(judge.rich_table([row]))
