"""Verdicts of a user's multi-worker program as `gpudiag run` saw it: its cluster's tasks
together, from one run or from every run that shared the logdir.

Input: the TaskReports of one cluster (gpudiag.records.run; built by gpudiag.run.tasks),
oldest first. Pure: no TensorFlow, no I/O. The tasks as the records show them are
cluster_tasks.py's; what went wrong with the cluster as a whole cluster_problems.py's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.readers import clusterplacement
from gpudiag.records.run import TaskReport
from gpudiag.report import Finding, Status
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import tf1
from gpudiag.verdicts.run.cluster_problems import cluster_problems
from gpudiag.verdicts.run.cluster_tasks import (
    BETWEEN_GRAPH,
    PSS,
    SERVER,
    Seen,
    coordinators,
    describe,
    overlap,
    steps_by_task,
    view_of,
)

ASYNC_BG = ("asynchronous: each worker runs its own copy of the graph and applies its "
            "updates to the variables on the parameter servers as it goes, waiting for no "
            "other worker (no tf.train.SyncReplicasOptimizer)")
SYNC_BG = ("synchronous: tf.train.SyncReplicasOptimizer aggregates the workers' gradients "
           "and the chief applies one update per round (each worker waits for the round)")
ASYNC_PS = ("asynchronous: the coordinator dispatches each step to whichever worker is "
            "free; each worker reads the variables from the parameter servers and applies "
            "its own update there, waiting for no other worker")


def _work(tasks: Sequence[TaskReport]) -> dict[str, dict[str, int]]:
    """Ops TensorFlow placed on each task, summed over the runs that saw the tasks (each
    run's log once: every task of one run carries the same counts)."""
    per_run = {t.run_dir: t.ops_by_task for t in tasks if t.ops_by_task}
    return clusterplacement.merge(list(per_run.values()))


def _synchronous(tasks: Sequence[TaskReport]) -> bool:
    return any(t.sync_replicas or tf1.sync_of(t.tf1) for t in tasks)


def _scheme(tasks: Sequence[TaskReport], spec: dict[str, list[str]],
            variables: dict[str, int], work: dict[str, dict[str, int]]) -> str | None:
    """The between-graph scheme the tasks' programs built (their TF1 constructs, the
    first worker's that recorded one), with where TensorFlow placed the variables and
    the ops; None when no task recorded a construct."""
    recorded = [t for t in tasks if t.tf1]
    if not recorded:
        return None
    workers = [f"worker-{i}" for i in range(len(spec.get("worker", [])))]
    return tf1.between_graph(recorded[0].tf1, sync_in_log=_synchronous(tasks),
                             variables=variables, ops=work, workers=workers,
                             chiefs=tf1.chiefs_of([(t.task, t.tf1) for t in recorded]))


def _mode(kind: str, tasks: Sequence[TaskReport]) -> str:
    if kind == PSS:
        return f" ({ASYNC_PS})"
    if kind == BETWEEN_GRAPH:
        return f" ({SYNC_BG if _synchronous(tasks) else ASYNC_BG})"
    return ""


def _crashed_before_use(seen: Sequence[TaskReport], died: Sequence[TaskReport]
                        ) -> str | None:
    """The program crashed before any task ran a step, and every task that ended early
    ended with it (crashed, or served in-process by a process that crashed): the cluster
    was never used, so nothing can be said of it; the crash is run.crash's."""
    crashed = [t for t in seen if t.crash]
    pids = {(t.host, t.pid) for t in crashed}
    if not crashed or any(t.steps for t in seen) or not all(
            t.crash or (t.host, t.pid) in pids for t in died):
        return None
    return ("the program crashed before it used its cluster (no task ran a step): "
            + "; ".join(f"{t.task} {t.crash}" for t in crashed)
            + " (run.crash says why and what to do; the tasks it served in-process ended "
            "with it)")


def formed_by_tasks(seen: Sequence[TaskReport]) -> bool:
    """Separate processes of the program joined the cluster (MultiWorkerMirroredStrategy's
    workers, each its own task): a crash after that, before any step, is the cluster's
    death and is judged (fail: who died, of what); one process serving every task (an
    in-process cluster) that crashed took its cluster with it and never used it."""
    return len({(t.host, t.pid) for t in seen
                if t.joined == "joined" and t.via != SERVER and not t.in_process}) > 1


def cluster(tasks: Sequence[TaskReport], *, check_id: str = "run.cluster",
            scope: str = "this run", earlier: int = 0,
            combined_report: str | None = None) -> Finding:
    """The cluster's tasks together: who ran where, how far each got, and the first thing
    that went wrong with the cluster as a whole (never formed, a task given twice, a task
    that died, localhost across machines, tasks not seen)."""
    v = view_of(tasks)
    seen, kind = v.seen, v.kind
    in_process = sorted({t.pid for t in seen if t.in_process})
    work = _work(seen)
    # the most any one run's log placed: each between-graph worker's graph places the same
    # ps variables again, so the runs' counts are not added
    variables = clusterplacement.most(
        list({t.run_dir: t.variables_by_task for t in seen if t.variables_by_task}.values()))
    scheme = _scheme(seen, v.spec, variables, work) if kind == BETWEEN_GRAPH else None
    head = _head(v, scope, scheme, in_process, variables, work)
    evidence: dict[str, Any] = {
        "kind": kind, "cluster_spec": v.spec, "expected": v.expected, "missing": v.missing,
        "unknown": v.unknown, "formed": v.formed, "stragglers": v.stragglers,
        "lost_peers": v.lost, "died": [t.task for t in v.died],
        "duplicates": {k: [f"{t.host}:{t.pid}" for t in d] for k, d in v.duplicates.items()},
        "restarts": v.restarts, "hosts": v.hosts, "earlier_runs_left_out": earlier,
        "coordinator_added_by_tensorflow": coordinators(tasks, v.spec),
        "never_trained": [t.task for t in v.never],
        "mode": ("synchronous" if kind == BETWEEN_GRAPH and _synchronous(seen)
                 else "asynchronous") if kind in (PSS, BETWEEN_GRAPH) else None,
        "scheme": scheme, "tf1_constructs": {t.task: t.tf1 for t in seen if t.tf1},
        "in_process_pids": in_process, "ops_by_task": work, "variables_by_task": variables,
        "steps_by_task": steps_by_task(seen),
        "tasks": [{"task": t.task, "via": t.via, "joined": t.joined, "host": t.host,
                   "pid": t.pid, "run_dir": t.run_dir, "steps": t.steps,
                   "step_s_median": t.step_s_median, "examples_per_s": t.examples_per_s,
                   "last_loss": t.last_loss, "crash": t.crash, "exited": t.exited,
                   "global_step": t.global_step,
                   "gpus": t.gpus}
                  for t in seen]}
    problems = cluster_problems(v, scope)
    if v.restarts:
        head += "; restarted: " + ", ".join(f"{k} x{n}" for k, n in v.restarts.items()) + \
            " (the latest run of each counts)"
    if earlier:
        head += f" ({earlier} task record(s) of earlier runs of this cluster left out)"
    if combined_report:
        head += f"; the cluster's report: {combined_report}"
        evidence["combined_report"] = combined_report
    unused = None if formed_by_tasks(seen) else _crashed_before_use(seen, v.died)
    if unused is not None and not (v.duplicates or v.unknown
                                   or (len(v.hosts) > 1 and v.loopback)):
        evidence["crashed_before_use"] = [t.task for t in seen if t.crash]
        return Finding(check_id, "skip", unused + ". " + head, evidence,
                       title="the program crashed before it used its cluster")
    if not problems:
        return Finding(check_id, "ok", head, evidence, title=_ok_title(v, scheme))
    status: Status = "fail" if any(p[0] == "fail" for p in problems) else "warn"
    text = "; ".join(p[1] for p in problems) + ". " + head
    advice = " ".join(dict.fromkeys(p[2] for p in problems))
    first = next(p for p in problems if p[0] == status)
    more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
    return Finding(check_id, status, text, evidence, advice=advice,
                   title=title(first[3] + more, first[3]))


def _ok_title(v: Seen, scheme: str | None) -> str:
    steps = [t.steps for t in v.seen if t.steps]
    ran = f", up to {counted(max(steps), 'step')}" if steps else ""
    return title(f"{scheme or v.kind} cluster: {len(v.seen)} of {len(v.expected)} task(s) "
                 f"seen{ran}", f"cluster: {len(v.seen)} of {len(v.expected)} task(s) seen{ran}")


def _head(v: Seen, scope: str, scheme: str | None, in_process: list[int],
          variables: dict[str, int], work: dict[str, Any]) -> str:
    """The sentence every run.cluster finding starts from: the kind, the tasks, each task."""
    seen = v.seen
    head = (f"{scheme or v.kind} cluster of {len(v.expected)} task(s) "
            f"({', '.join(v.expected)})"
            + ("" if scheme else _mode(v.kind, seen))
            + (f", in-process: pid {', '.join(map(str, in_process))} served "
               f"{', '.join(t.task for t in seen if t.pid in in_process)}"
               if in_process else "")
            + f"; {len(seen)} seen in {scope}: " + "; ".join(describe(t) for t in seen))
    if variables:
        head += "; variables created on: " + ", ".join(f"{k} {n}" for k, n in variables.items())
    if work:
        head += ("; TensorFlow's placement log placed work on: "
                 + clusterplacement.listing(work))
    rates = [t.examples_per_s for t in seen if t.examples_per_s]
    if len(rates) > 1 and len(rates) == len([t for t in seen if t.steps]):
        head += f"; together {sum(rates):,.0f} examples/s (the sum of what each measured)"
    return head


def same_job(tasks: Sequence[TaskReport], mine: Sequence[TaskReport]
             ) -> tuple[list[TaskReport], list[TaskReport]]:
    """The tasks of the job ``mine`` belong to, and the earlier ones: a logdir keeps every
    run of a cluster spec, and a job is the tasks whose lifetimes overlap, directly or
    through others (a restarted task overlaps the tasks that kept running)."""
    ours = {(m.host, m.pid, m.run_dir) for m in mine}
    job = list(mine)
    rest = [t for t in tasks if (t.host, t.pid, t.run_dir) not in ours]
    grew = True
    while grew:
        grew = False
        for t in list(rest):
            if any(overlap(t, j) for j in job):
                job.append(t)
                rest.remove(t)
                grew = True
    job.sort(key=lambda t: (t.started_unix_s or 0.0, t.task_type, t.task_id))
    return job, rest
