"""The cluster tasks among a program's processes, and runs that share a logdir (parent).

A process of the program is a task of a cluster when it joined one (a
MultiWorkerMirroredStrategy, a ParameterServerStrategy's coordinator, a
tf.distribute.Server: gpudiag.inprogram.strategies records it before TensorFlow connects) or,
failing that, when the TF_CONFIG it started with names its task. Each such process becomes
a ``TaskReport``: which task, how joining went, how far it trained, how it ended.

Tasks of one cluster are seen by one `gpudiag run` (a launcher that starts every worker)
or by several (each machine runs `gpudiag run --logdir /shared/runs -- python train.py`).
Either way every run writes its tasks into ``<logdir>/cluster-<key>/tasks/`` and then
reads back every task of that cluster found there, under an exclusive lock (flock; the
lock of a shared filesystem where it supports one), so the run that ends last sees them
all. Its finding goes into the run's own report and into the cluster's combined
``report.json``/``report.md`` beside the tasks. A task that ran twice is told apart by
time: two runs of one task at the same time are a mistake (the same task index given
twice); one after the other, a restart (the latest counts).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import socket
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag import files
from gpudiag.cluster import messages
from gpudiag.errors import UsageError, WriteFailed
from gpudiag.layout import (
    REPORT_MD,
    RUN_CLUSTER_LOCK,
    RUN_CLUSTER_TASKS_DIR,
    run_cluster_dir,
    run_task_file_name,
)
from gpudiag.readers import clusterplacement
from gpudiag.records import tfconfig
from gpudiag.records.run import ProcessObservation, TaskReport
from gpudiag.report import Finding, Report, now_iso
from gpudiag.reportmd import save as save_report
from gpudiag.verdicts.run import cluster as run_cluster
from gpudiag.verdicts.run import tf1 as run_tf1
from gpudiag.verdicts.run import throughput as run_throughput

CLUSTER_REPORT_COMMAND = "run-cluster"


def cluster_key(spec: dict[str, list[str]]) -> str:
    """The same cluster spec (jobs and addresses), the same key, on every machine."""
    canonical = json.dumps({k: list(v) for k, v in sorted(spec.items())}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:12]


def identity(obs: ProcessObservation) -> tuple[str, int, dict[str, list[str]], str] | None:
    """(task type, task index, cluster spec, how it is known) of a process, or None: the
    cluster it joined, else its multi-worker strategy's, else the TF_CONFIG it started
    with (when cluster.tfconfig finds it valid)."""
    for join in reversed(obs.cluster_joins):
        if join.task_type and join.task_id is not None and join.cluster_spec:
            return join.task_type, int(join.task_id), join.cluster_spec, join.via
    for s in reversed(obs.strategies):
        c = s.cluster or {}
        if c.get("task_type") and c.get("task_id") is not None and c.get("cluster_spec"):
            return str(c["task_type"]), int(c["task_id"]), c["cluster_spec"], s.class_name
    try:
        config = tfconfig.parse(obs.start_env.get("TF_CONFIG"))
    except UsageError:
        return None
    return (config.task_type, config.task_index,
            {job: list(addresses) for job, addresses in config.cluster.items()}, "TF_CONFIG")


def hosted(obs: ProcessObservation) -> list[tuple[str, int, dict[str, list[str]], str, str]]:
    """Every task this process joined as (type, index, spec, via, outcome), the task it
    is known by (``identity``) last. More than one: an in-process cluster (the TF2
    parameter-server tutorial starts a tf.distribute.Server per worker and ps in the
    coordinator's own process)."""
    found: dict[tuple[str, int], tuple[str, int, dict[str, list[str]], str, str]] = {}
    for join in obs.cluster_joins:
        if join.task_type and join.task_id is not None and join.cluster_spec:
            key = (join.task_type, int(join.task_id))
            found.pop(key, None)
            found[key] = (key[0], key[1], join.cluster_spec, join.via, join.outcome)
    return list(found.values())


def _progress(obs: ProcessObservation, warmup: int) -> dict[str, Any]:
    # the longest loop; of loops as long, one that fetched a loss (a MonitoredTrainingSession
    # chief's hooks read the global step as often as its loop runs)
    series = max(obs.series, key=lambda s: (len(s.steps), any(st.loss is not None
                                                              for st in s.steps)),
                 default=None)
    gstep = next((s.facts["global_step"] for s in obs.series
                  if isinstance(s.facts.get("global_step"), int)), None)
    if series is None or not series.steps:
        fit = next((s for s in obs.series if s.kind == "fit" and s.epochs), None)
        if fit is None:
            return {"global_step": gstep}
        per_epoch = (fit.facts.get("params") or {}).get("steps")
        return {"loop": fit.label, "global_step": gstep,
                "steps": per_epoch * len(fit.epochs) if isinstance(per_epoch, int) else 0}
    losses = [s.loss for s in series.steps if s.loss is not None]
    ends = [s.start_unix_s + (s.duration_s or 0.0) for s in series.steps
            if s.start_unix_s is not None]
    out: dict[str, Any] = {"loop": series.label, "steps": max(s.index for s in series.steps) + 1,
                           "first_loss": losses[0] if losses else None,
                           "last_loss": losses[-1] if losses else None,
                           "last_step_end_unix_s": max(ends) if ends else None,
                           "global_step": series.facts.get("global_step", gstep)}
    timing = run_throughput.loop_timing(obs, series, warmup)
    if timing is not None:
        out["step_s_median"] = timing["step_s_median"]
        out["examples_per_s"] = timing.get("examples_per_s")
    return out


def _gpus(pid: int, nvml_gpus: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The GPUs NVML saw ``pid`` on; every GPU of the machine when NVML lists no process."""
    if nvml_gpus is None:
        return None
    listed = any(g.get("processes") for g in nvml_gpus)
    return [{"index": g["index"], "name": g.get("name"),
             "util_p95_percent": g.get("util_p95_percent"),
             "util_p95_ci_percent": g.get("util_p95_ci_percent"),
             "peak_memory_used_bytes": g.get("peak_memory_used_bytes"),
             "this_process": pid in (g.get("processes") or []) if listed else None}
            for g in nvml_gpus if not listed or pid in (g.get("processes") or [])]


def _crash(obs: ProcessObservation) -> str | None:
    if obs.crash is not None:
        first = obs.crash.message.strip().splitlines()[:1]
        return f"{obs.crash.type}: {first[0][:300]}" if first else obs.crash.type
    lines = [ln for ln in obs.faults.strip().splitlines() if ln.strip()]
    return f"fatal signal: {lines[0][:200]}" if lines else None


@dataclass(frozen=True)
class RunEnd:
    """How the `gpudiag run` that saw the tasks ended, and what it measured beside."""

    run_dir: Path
    returncode: int | None  # the program's
    interrupted: bool
    warmup: int  # steps left out of the timing (--profile-warmup-steps)
    program_pid: int | None  # the program's own pid: the task with it was the program itself
    nvml_gpus: list[dict[str, Any]] | None = None  # gpu_verdicts.gpu_numbers of each GPU
    host: str | None = None  # None: this host's name


def task_reports(tf_procs: Sequence[ProcessObservation], stderr: str,
                 end: RunEnd) -> list[TaskReport]:
    """A TaskReport for every process of this run that is a cluster task. The program's
    ``returncode`` is the task's own when the task is the program (its pid is
    ``program_pid``). ``stderr`` is the run's whole stderr: what TensorFlow said
    about stragglers and lost peers is a fact of the cluster, whichever process wrote it."""
    if not any(identity(obs) is not None for obs in tf_procs):
        return []  # no cluster task: nothing to read in a long job's stderr
    host = end.host or socket.gethostname()
    run_dir, returncode, interrupted = end.run_dir, end.returncode, end.interrupted
    warmup, program_pid, nvml_gpus = end.warmup, end.program_pid, end.nvml_gpus
    stragglers = messages.stragglers(stderr)
    lost = messages.lost_peers(stderr)
    placed = clusterplacement.ops_by_task(stderr)
    waiting_for, waiting_lines = messages.still_waiting(stderr)
    out = []
    for obs in tf_procs:
        found = identity(obs)
        if found is None:
            continue
        task_type, task_id, spec, via = found
        join = obs.cluster_joins[-1] if obs.cluster_joins else None
        common: dict[str, Any] = {
            "host": host, "pid": obs.pid, "run_dir": str(run_dir.resolve()),
            "started_unix_s": obs.first_t_unix_s, "ended_unix_s": obs.last_t_unix_s,
            "exited": obs.exited, "interrupted": interrupted,
            "returncode": returncode if obs.pid == program_pid else None,
            "stragglers": stragglers, "lost_peers": lost, "gpus": _gpus(obs.pid, nvml_gpus),
            "ops_by_task": placed,
            "variables_by_task": clusterplacement.variables_by_task(stderr),
            "sessions": len(obs.sessions),
            "sync_replicas": clusterplacement.sync_replicas(stderr),
            "waiting_for": waiting_for, "waiting_lines": waiting_lines,
            "tf1": run_tf1.task_constructs(obs.tf1_calls)}
        others = [h for h in hosted(obs) if (h[0], h[1]) != (task_type, task_id)]
        for o_type, o_id, o_spec, o_via, o_outcome in others:
            out.append(TaskReport(task_type=o_type, task_id=o_id,
                                  cluster_key=cluster_key(o_spec), cluster_spec=o_spec,
                                  via=o_via, joined=o_outcome, in_process=True, **common))
        out.append(TaskReport(
            task_type=task_type, task_id=task_id, cluster_key=cluster_key(spec),
            cluster_spec=spec, via=via, joined=join.outcome if join else "never",
            in_process=bool(others), crash=_crash(obs), **common, **_progress(obs, warmup)))
    return out


@contextmanager
def _locked(directory: Path) -> Iterator[None]:
    with (directory / RUN_CLUSTER_LOCK).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _read(tasks_dir: Path) -> tuple[list[TaskReport], list[str]]:
    found, unreadable = [], []
    for path in sorted(tasks_dir.glob("*.json")):
        try:
            found.append(TaskReport.from_dict(json.loads(path.read_text(encoding="utf-8"))))
        except (OSError, ValueError, TypeError) as exc:
            unreadable.append(f"{path.name}: {exc}")
    found.sort(key=lambda t: (t.started_unix_s or 0.0, t.task_type, t.task_id))
    return found, unreadable


def share(logdir: Path, reports: Sequence[TaskReport]) -> list[Finding]:
    """Write this run's tasks under ``logdir``, read every task of their clusters back,
    keep those of the same job (verdicts.run_cluster.same_job) and judge them: one finding
    per cluster (``run.cluster``, or ``run.cluster.<key>`` when the run saw several), also
    written as the cluster directory's combined report."""
    keys = list(dict.fromkeys(r.cluster_key for r in reports))
    findings = []
    for key in keys:
        directory = run_cluster_dir(logdir, key)
        tasks_dir = directory / RUN_CLUSTER_TASKS_DIR
        try:
            tasks_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise WriteFailed.of(exc, tasks_dir) from exc
        mine = [r for r in reports if r.cluster_key == key]
        with _locked(directory):
            for r in mine:
                name = run_task_file_name(r.task_type, r.task_id, r.host, r.pid)
                files.atomic_write_text(tasks_dir / name,
                                        files.dumps_strict(r.to_dict(), indent=1) + "\n")
            tasks, unreadable = _read(tasks_dir)
            job, earlier = run_cluster.same_job(tasks, mine)
            finding = run_cluster.cluster(
                job, check_id="run.cluster" if len(keys) == 1 else f"run.cluster.{key}",
                scope=f"logdir {logdir}", earlier=len(earlier),
                combined_report=str(directory / REPORT_MD))
            if unreadable:
                finding.evidence["unreadable_task_files"] = unreadable
            combined = Report(command=CLUSTER_REPORT_COMMAND, run_dir=str(directory))
            combined.add(finding)
            combined.data["tasks"] = files.strict_json([t.to_dict() for t in job])[0]
            combined.partial = False
            combined.finished_at = now_iso()
            save_report(combined, directory)
        findings.append(finding)
    return findings
