"""Verdicts of a user's multi-worker program as `gpudiag run` saw it: its cluster's tasks
together, from one run or from every run that shared the logdir.

Input: the TaskReports of one cluster (gpudiag.records.run; built by gpudiag.run.tasks),
oldest first. Pure: no TensorFlow, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.readers import clusterplacement
from gpudiag.records.run import TaskReport
from gpudiag.records.tfconfig import is_loopback_address
from gpudiag.report import Finding, Status
from gpudiag.verdicts.cluster import NOT_FORMED_ADVICE
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import tf1

SERVER = "tf.distribute.Server"
SERVERS_ONLY = ("tf.distribute.Server (tf.compat.v1.train.Server) tasks, no strategy and no "
                "Session seen")
PSS = "ParameterServerStrategy"
BETWEEN_GRAPH = "between-graph replication (tf.compat.v1, no tf.distribute strategy)"
ASYNC_BG = ("asynchronous: each worker runs its own copy of the graph and applies its "
            "updates to the variables on the parameter servers as it goes, waiting for no "
            "other worker (no tf.train.SyncReplicasOptimizer)")
SYNC_BG = ("synchronous: tf.train.SyncReplicasOptimizer aggregates the workers' gradients "
           "and the chief applies one update per round (each worker waits for the round)")
SLOW_STOP_S = 30.0  # a task that ended this long after its last step: said, with why
SYNC_STOP_ADVICE = (
    "With tf.train.SyncReplicasOptimizer the chief's MonitoredTrainingSession, as it "
    "closes, waits for its queue-runner threads (sync_token_q) up to the Coordinator's "
    "stop grace period, 120 s by default: pass stop_grace_period_secs (a few seconds) to "
    "tf.compat.v1.train.MonitoredTrainingSession to end sooner.")
WAITING_ADVICE = (
    "A tf.compat.v1 Session waits for every task of the cluster spec: start the task it "
    "waits for, or, when that task has already finished (the chief ended before this "
    "worker was ready: a non-chief checks every 30 s), let each worker see only the ps and "
    "itself: tf.compat.v1.ConfigProto(device_filters=['/job:ps', "
    "'/job:worker/task:%d' % task_index]) passed as MonitoredTrainingSession(config=...).")
ASYNC_PS = ("asynchronous: the coordinator dispatches each step to whichever worker is "
            "free; each worker reads the variables from the parameter servers and applies "
            "its own update there, waiting for no other worker")
DUPLICATE_ADVICE = (
    "Give every process its own task: TF_CONFIG's task.index (or the task_index you pass) "
    "must differ between the processes of one job, and each address may be used once.")
DIED_ADVICE = (
    "Read that task's error (its crash here, its stderr); under MultiWorkerMirroredStrategy "
    "one task stopping stops every other at its next all-reduce. Restart all tasks; "
    "tf.keras.callbacks.BackupAndRestore (or a tf.train.CheckpointManager you restore at "
    "start) lets the restarted job resume where it stopped.")
LOCALHOST_ADVICE = (
    "Put in TF_CONFIG each task's address as the other machines reach it (a host name or "
    "IP, not localhost), the same cluster spec on every machine.")


def _overlap(a: TaskReport, b: TaskReport) -> bool:
    if None in (a.started_unix_s, a.ended_unix_s, b.started_unix_s, b.ended_unix_s):
        return False
    return a.started_unix_s <= b.ended_unix_s and b.started_unix_s <= a.ended_unix_s  # type: ignore[operator]


def expected_tasks(spec: dict[str, list[str]]) -> list[str]:
    return [f"{job}-{i}" for job, addresses in spec.items() for i in range(len(addresses))]


def _coordinators(tasks: Sequence[TaskReport], spec: dict[str, list[str]]) -> list[str]:
    """A ParameterServerStrategy coordinator whose job the spec does not name: TensorFlow
    adds it itself (eager/remote.py connect_to_cluster adds the coordinator's job, on a
    local port, when the cluster spec lacks it), as the tutorial's in-process cluster has
    it. It is part of the cluster, not a task outside the spec."""
    return list(dict.fromkeys(t.task for t in tasks
                              if t.via == PSS and t.task_type not in spec))


def _work(tasks: Sequence[TaskReport]) -> dict[str, dict[str, int]]:
    """Ops TensorFlow placed on each task, summed over the runs that saw the tasks (each
    run's log once: every task of one run carries the same counts)."""
    per_run = {t.run_dir: t.ops_by_task for t in tasks if t.ops_by_task}
    return clusterplacement.merge(list(per_run.values()))


def _kind(tasks: Sequence[TaskReport]) -> str:
    vias = {t.via for t in tasks}
    for name in ("MultiWorkerMirroredStrategy", PSS):
        if name in vias:
            return name
    if any(t.sessions for t in tasks) or any(
            c["api"] in tf1.BETWEEN_GRAPH_APIS for t in tasks for c in t.tf1):
        return BETWEEN_GRAPH
    if vias <= {SERVER}:
        # only tf.distribute.Servers were seen (a TF1 ps task's server.join(), workers that
        # ended before their Session): never named ParameterServerStrategy, which is TF2's
        # coordinator API that none of these processes created
        return SERVERS_ONLY
    return next(iter(vias - {SERVER, "TF_CONFIG"}), "TF_CONFIG")


def _describe(t: TaskReport) -> str:
    parts = [f"pid {t.pid} on {t.host}"]
    if _never_trained(t):
        parts.append(f"never trained: TensorFlow was still waiting for "
                     f"{', '.join(t.waiting_for)} ({t.waiting_lines} time(s) "
                     "'CreateSession still waiting for response from worker')")
    if t.joined == "waiting":
        parts.append("still waiting for the cluster when it ended")
    elif t.joined == "failed":
        parts.append("failed to join")
    if t.steps and t.via == PSS:
        parts.append(f"coordinator: dispatched {counted(t.steps, 'step')} of {t.loop} to the "
                     f"workers"
                     + (f", global step {t.global_step} (optimizer.iterations)"
                        if t.global_step is not None else ""))
    elif t.steps and not _never_trained(t):
        step = f"{counted(t.steps, 'step')}"
        if t.sessions:
            step = f"{counted(t.steps, 'local step')}, " + (
                f"global step {t.global_step}" if t.global_step is not None
                else "global step not observed (its runs fetched no global_step)")
        if t.step_s_median:
            step += f", median {t.step_s_median * 1e3:.1f} ms/step"
        if t.examples_per_s:
            step += f", {t.examples_per_s:,.0f} examples/s"
        parts.append(step)
    elif t.via == SERVER and not t.sessions:
        parts.append("served in the coordinator's process (in-process cluster)"
                     if t.in_process else "served (no loop of its own)")
    elif t.via == PSS:
        parts.append("coordinator: dispatched the steps (ClusterCoordinator closures are "
                     "not timed here)")
    if t.gpus is not None:
        mine = any(g.get("this_process") for g in t.gpus)
        gpus = ", ".join(f"GPU {g['index']} p95 {g['util_p95_percent']:.0f} %"
                         if g.get("util_p95_percent") is not None else f"GPU {g['index']}"
                         for g in t.gpus)
        parts.append(("on " if mine else "its machine's NVML: ") + gpus if gpus
                     else "no GPU in use by it (NVML)")
    tail = _after_last_step(t)
    if tail is not None and tail > SLOW_STOP_S:
        parts.append(f"ended {tail:.0f} s after its last step")
    if t.first_loss is not None and t.last_loss is not None:
        parts.append(f"loss {t.first_loss:.4g} -> {t.last_loss:.4g}")
    if t.crash:
        parts.append(t.crash)
    return f"{t.task} ({', '.join(parts)})"


def _after_last_step(t: TaskReport) -> float | None:
    if t.last_step_end_unix_s is None or t.ended_unix_s is None or not t.exited:
        return None
    return t.ended_unix_s - t.last_step_end_unix_s


def steps_by_task(seen: Sequence[TaskReport]) -> dict[str, dict[str, Any]]:
    """Per task that ran a loop: its local steps and the global step it observed last,
    or why there is none (only what was observed)."""
    out: dict[str, dict[str, Any]] = {}
    for t in seen:
        if not t.steps or _never_trained(t):
            continue
        row: dict[str, Any] = {"local_steps": t.steps, "global_step": t.global_step}
        if t.via == PSS:
            row["local_steps"] = None
            row["dispatched_steps"] = t.steps
            row["per_worker"] = ("not recorded: the ClusterCoordinator's closures are not "
                                 "counted per worker here")
        if t.global_step is None:
            row["global_step_skipped"] = (
                "its Session runs fetched no global_step" if t.sessions
                else "no global step observed (no optimizer.iterations read, no "
                     "global_step fetched)")
        out[t.task] = row
    return out


def _never_trained(t: TaskReport) -> bool:
    """Its Session never started: TensorFlow's master was still waiting for a task when
    the process ended (stopped, killed): whatever runs it made were before that."""
    return bool(t.waiting_for) and (t.interrupted or not t.exited)


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


def _died(t: TaskReport) -> bool:
    """Ended by a crash, or cut short without its exit handler (killed), when gpudiag was
    not the one stopping it. A server killed after the job is how servers end."""
    if t.crash:
        return True
    if t.interrupted:  # stopped with the run (Ctrl-C, SIGTERM ...): not a death
        return False
    if t.returncode not in (None, 0) and not (t.via == SERVER and t.returncode < 0):
        return True
    return not t.exited and t.via != SERVER


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


def _deaths(v: _Seen) -> list[tuple[Status, str, str, str]]:
    """Each task that died, with what it died of and how far the others got; tasks that
    all died of the same exception said once, together."""
    died, lost = v.died, v.lost
    tail = f"; TensorFlow reported lost: {', '.join(lost)}" if lost else ""
    crashes = {t.crash for t in died}
    if len(died) > 1 and len(died) == len(v.seen) and len(crashes) == 1 and died[0].crash:
        steps = {t.steps for t in died}
        after = f"{died[0].steps} step(s) each" if len(steps) == 1 else \
            ", ".join(f"{t.task} {t.steps} step(s)" for t in died)
        return [("fail", f"every task died, of the same exception: "
                 f"{', '.join(t.task for t in died)} ({died[0].crash}) after {after}{tail}",
                 DIED_ADVICE, title(f"every task died, of the same exception: "
                                    f"{', '.join(t.task for t in died)}",
                                    f"all {len(died)} tasks died of the same exception"))]
    out: list[tuple[Status, str, str, str]] = []
    for t in died:
        others = [o for o in v.seen if o is not t]
        how = t.crash or "killed: no exit, no Python exception"
        out.append(("fail", f"{t.task} died ({how}) after {t.steps} step(s)"
                    + ("; the others reached: " + ", ".join(
                        f"{o.task} step {o.steps}" for o in others) if others else "")
                    + tail, DIED_ADVICE, title(f"{t.task} died after {t.steps} step(s)",
                                               f"a task died after {t.steps} step(s)")))
    return out


@dataclass(frozen=True)
class _Seen:
    """The cluster's tasks as the records show them, each fact derived once."""

    tasks: Sequence[TaskReport]
    latest: dict[str, TaskReport]
    duplicates: dict[str, list[TaskReport]]
    restarts: dict[str, int]
    spec: dict[str, Any]
    expected: list[str]
    missing: list[str]
    unknown: list[str]
    seen: list[TaskReport]
    kind: str

    @property
    def formed(self) -> bool:
        return any(t.joined == "joined" and t.via != SERVER for t in self.seen)

    @property
    def stragglers(self) -> list[str]:
        return list(dict.fromkeys(s for t in self.seen for s in t.stragglers))

    @property
    def lost(self) -> list[str]:
        return list(dict.fromkeys(s for t in self.seen for s in t.lost_peers))

    @property
    def died(self) -> list[TaskReport]:
        return [t for t in self.seen if _died(t)]

    @property
    def hosts(self) -> list[str]:
        return sorted({t.host for t in self.seen})

    @property
    def loopback(self) -> list[str]:
        return [a for addresses in self.spec.values() for a in addresses
                if is_loopback_address(a)]

    @property
    def never(self) -> list[TaskReport]:
        return [t for t in self.seen if _never_trained(t)]


def _seen(tasks: Sequence[TaskReport]) -> _Seen:
    latest: dict[str, TaskReport] = {}
    duplicates: dict[str, list[TaskReport]] = {}
    restarts: dict[str, int] = {}
    for t in tasks:
        before = latest.get(t.task)
        if before is not None:
            if _overlap(before, t) and (before.host, before.pid) != (t.host, t.pid):
                duplicates.setdefault(t.task, [before]).append(t)
            else:
                restarts[t.task] = restarts.get(t.task, 0) + 1
        latest[t.task] = t
    spec = tasks[-1].cluster_spec
    expected = expected_tasks(spec) + _coordinators(tasks, spec)
    unknown = [name for name in latest if name not in expected]
    return _Seen(tasks, latest, duplicates, restarts, spec, expected,
                 [name for name in expected if name not in latest], unknown,
                 [latest[n] for n in expected if n in latest] + [latest[n] for n in unknown],
                 _kind(tasks))


def cluster(tasks: Sequence[TaskReport], *, check_id: str = "run.cluster",
            scope: str = "this run", earlier: int = 0,
            combined_report: str | None = None) -> Finding:
    """The cluster's tasks together: who ran where, how far each got, and the first thing
    that went wrong with the cluster as a whole (never formed, a task given twice, a task
    that died, localhost across machines, tasks not seen)."""
    v = _seen(tasks)
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
        "coordinator_added_by_tensorflow": _coordinators(tasks, v.spec),
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
    problems = _problems(v, scope)
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


def _ok_title(v: _Seen, scheme: str | None) -> str:
    steps = [t.steps for t in v.seen if t.steps]
    ran = f", up to {counted(max(steps), 'step')}" if steps else ""
    return title(f"{scheme or v.kind} cluster: {len(v.seen)} of {len(v.expected)} task(s) "
                 f"seen{ran}", f"cluster: {len(v.seen)} of {len(v.expected)} task(s) seen{ran}")


def _head(v: _Seen, scope: str, scheme: str | None, in_process: list[int],
          variables: dict[str, int], work: dict[str, Any]) -> str:
    """The sentence every run.cluster finding starts from: the kind, the tasks, each task."""
    seen = v.seen
    head = (f"{scheme or v.kind} cluster of {len(v.expected)} task(s) "
            f"({', '.join(v.expected)})"
            + ("" if scheme else _mode(v.kind, seen))
            + (f", in-process: pid {', '.join(map(str, in_process))} served "
               f"{', '.join(t.task for t in seen if t.pid in in_process)}"
               if in_process else "")
            + f"; {len(seen)} seen in {scope}: " + "; ".join(_describe(t) for t in seen))
    if variables:
        head += "; variables created on: " + ", ".join(f"{k} {n}" for k, n in variables.items())
    if work:
        head += ("; TensorFlow's placement log placed work on: "
                 + clusterplacement.listing(work))
    rates = [t.examples_per_s for t in seen if t.examples_per_s]
    if len(rates) > 1 and len(rates) == len([t for t in seen if t.steps]):
        head += f"; together {sum(rates):,.0f} examples/s (the sum of what each measured)"
    return head


def _problems(v: _Seen, scope: str) -> list[tuple[Status, str, str, str]]:
    """What went wrong with the cluster as a whole, each with its status, text, advice
    and title."""
    seen, missing, formed = v.seen, v.missing, v.formed
    problems: list[tuple[Status, str, str, str]] = []
    if v.duplicates:
        problems.append(("fail", "the same task ran twice at once: " + "; ".join(
            f"{k} by " + " and ".join(f"pid {t.pid} on {t.host}" for t in d)
            for k, d in v.duplicates.items()), DUPLICATE_ADVICE,
            title(f"the same task ran twice at once: {', '.join(v.duplicates)}",
                  "the same task ran twice at once")))
    if v.unknown:
        problems.append(("fail", f"{', '.join(v.unknown)} is not in the cluster spec "
                         f"({', '.join(v.expected)})", DUPLICATE_ADVICE,
                         title(f"{', '.join(v.unknown)} is not in the cluster spec",
                               f"{len(v.unknown)} task(s) not in the cluster spec")))
    waiting = [t for t in seen if t.joined == "waiting"]
    stragglers = v.stragglers
    if not formed and (waiting or stragglers):
        absent = stragglers or missing
        problems.append(("fail", "the cluster never formed: "
                         + (f"{', '.join(t.task for t in waiting)} waited for "
                            if waiting else "TensorFlow waited for ")
                         + (", ".join(absent) if absent else "the other tasks")
                         + (f" ({', '.join(n for n in absent if n in missing)} never ran "
                            f"under gpudiag in {scope})" if set(absent) & set(missing)
                            else ""), NOT_FORMED_ADVICE,
                         title(f"the cluster never formed: {len(absent) or 'the other'} "
                               "task(s) never joined", "the cluster never formed")))
    never = v.never
    if never:
        problems.append(("fail", "; ".join(
            f"{t.task} never trained: it waited for {', '.join(t.waiting_for)} (TensorFlow: "
            f"'CreateSession still waiting for response from worker', {t.waiting_lines} "
            "time(s), every 10 s) until it was stopped" for t in never), WAITING_ADVICE,
            title(f"{', '.join(t.task for t in never)} never trained: waited for a worker",
                  f"{len(never)} task(s) never trained: waited for a worker")))
    slow = [t for t in seen if t.sync_replicas and (_after_last_step(t) or 0.0) > SLOW_STOP_S]
    if slow and v.kind == BETWEEN_GRAPH:
        problems.append(("warn", "; ".join(
            f"{t.task} ended {_after_last_step(t):.0f} s after its last step (the "
            "SyncReplicasOptimizer chief's stop grace period)" for t in slow),
            SYNC_STOP_ADVICE,
            title(f"{slow[0].task} ended {_after_last_step(slow[0]):.0f} s after its last "
                  "step", "the chief ended long after its last step")))
    hosts, loopback = v.hosts, v.loopback
    if len(hosts) > 1 and loopback:
        problems.append(("fail", f"TF_CONFIG names {', '.join(loopback)} but the tasks ran "
                         f"on {len(hosts)} machines ({', '.join(hosts)}): a loopback "
                         "address reaches only the machine it is used on",
                         LOCALHOST_ADVICE,
                         f"TF_CONFIG names loopback but the tasks ran on {len(hosts)} machines"))
    problems += _deaths(v)
    if missing and formed:
        problems.append(("warn", f"{', '.join(missing)} not seen in {scope} (the cluster "
                         "formed, so they ran): without gpudiag, with another --logdir, or "
                         "they have not ended yet (the run that ends last reports every "
                         "task)",
                         "Run every task under `gpudiag run --logdir <the same directory>` "
                         "to see them together.",
                         title(f"{', '.join(missing)} not seen in {scope}",
                               f"{len(missing)} task(s) not seen in {scope}",
                               f"{len(missing)} task(s) not seen")))
    return problems


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
            if any(_overlap(t, j) for j in job):
                job.append(t)
                rest.remove(t)
                grew = True
    job.sort(key=lambda t: (t.started_unix_s or 0.0, t.task_type, t.task_id))
    return job, rest
