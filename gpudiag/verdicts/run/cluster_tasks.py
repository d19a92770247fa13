"""A user's multi-worker program's tasks as the records show them (the verdict is
gpudiag.verdicts.run.cluster's): the latest record of each task, the tasks the cluster spec
expects, those given twice or restarted (Seen, view_of), the cluster's kind, and each
task's facts: how far it got, whether it died or never trained, in words (describe).

Pure: gpudiag.records.run's TaskReports in, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.records.run import TaskReport
from gpudiag.records.tfconfig import is_loopback_address
from gpudiag.verdicts.run import tf1

SERVER = "tf.distribute.Server"


SERVERS_ONLY = ("tf.distribute.Server (tf.compat.v1.train.Server) tasks, no strategy and no "
                "Session seen")


PSS = "ParameterServerStrategy"


BETWEEN_GRAPH = "between-graph replication (tf.compat.v1, no tf.distribute strategy)"


SLOW_STOP_S = 30.0  # a task that ended this long after its last step: said, with why


def overlap(a: TaskReport, b: TaskReport) -> bool:
    if None in (a.started_unix_s, a.ended_unix_s, b.started_unix_s, b.ended_unix_s):
        return False
    return a.started_unix_s <= b.ended_unix_s and b.started_unix_s <= a.ended_unix_s  # type: ignore[operator]


def expected_tasks(spec: dict[str, list[str]]) -> list[str]:
    return [f"{job}-{i}" for job, addresses in spec.items() for i in range(len(addresses))]


def coordinators(tasks: Sequence[TaskReport], spec: dict[str, list[str]]) -> list[str]:
    """A ParameterServerStrategy coordinator whose job the spec does not name: TensorFlow
    adds it itself (eager/remote.py connect_to_cluster adds the coordinator's job, on a
    local port, when the cluster spec lacks it), as the tutorial's in-process cluster has
    it. It is part of the cluster, not a task outside the spec."""
    return list(dict.fromkeys(t.task for t in tasks
                              if t.via == PSS and t.task_type not in spec))


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


def describe(t: TaskReport) -> str:
    parts = [f"pid {t.pid} on {t.host}"]
    if never_trained(t):
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
    elif t.steps and not never_trained(t):
        step = counted(t.steps, "step")
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
    tail = after_last_step(t)
    if tail is not None and tail > SLOW_STOP_S:
        parts.append(f"ended {tail:.0f} s after its last step")
    if t.first_loss is not None and t.last_loss is not None:
        parts.append(f"loss {t.first_loss:.4g} -> {t.last_loss:.4g}")
    if t.crash:
        parts.append(t.crash)
    return f"{t.task} ({', '.join(parts)})"


def after_last_step(t: TaskReport) -> float | None:
    if t.last_step_end_unix_s is None or t.ended_unix_s is None or not t.exited:
        return None
    return t.ended_unix_s - t.last_step_end_unix_s


def steps_by_task(seen: Sequence[TaskReport]) -> dict[str, dict[str, Any]]:
    """Per task that ran a loop: its local steps and the global step it observed last,
    or why there is none (only what was observed)."""
    out: dict[str, dict[str, Any]] = {}
    for t in seen:
        if not t.steps or never_trained(t):
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


def never_trained(t: TaskReport) -> bool:
    """Its Session never started: TensorFlow's master was still waiting for a task when
    the process ended (stopped, killed): whatever runs it made were before that."""
    return bool(t.waiting_for) and (t.interrupted or not t.exited)


def task_died(t: TaskReport) -> bool:
    """Ended by a crash, or cut short without its exit handler (killed), when gpudiag was
    not the one stopping it. A server killed after the job is how servers end."""
    if t.crash:
        return True
    if t.interrupted:  # stopped with the run (Ctrl-C, SIGTERM ...): not a death
        return False
    if t.returncode not in (None, 0) and not (t.via == SERVER and t.returncode < 0):
        return True
    return not t.exited and t.via != SERVER


@dataclass(frozen=True)
class Seen:
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
        return [t for t in self.seen if task_died(t)]

    @property
    def hosts(self) -> list[str]:
        return sorted({t.host for t in self.seen})

    @property
    def loopback(self) -> list[str]:
        return [a for addresses in self.spec.values() for a in addresses
                if is_loopback_address(a)]

    @property
    def never(self) -> list[TaskReport]:
        return [t for t in self.seen if never_trained(t)]


def view_of(tasks: Sequence[TaskReport]) -> Seen:
    latest: dict[str, TaskReport] = {}
    duplicates: dict[str, list[TaskReport]] = {}
    restarts: dict[str, int] = {}
    for t in tasks:
        before = latest.get(t.task)
        if before is not None:
            if overlap(before, t) and (before.host, before.pid) != (t.host, t.pid):
                duplicates.setdefault(t.task, [before]).append(t)
            else:
                restarts[t.task] = restarts.get(t.task, 0) + 1
        latest[t.task] = t
    spec = tasks[-1].cluster_spec
    expected = expected_tasks(spec) + coordinators(tasks, spec)
    unknown = [name for name in latest if name not in expected]
    return Seen(tasks, latest, duplicates, restarts, spec, expected,
                 [name for name in expected if name not in latest], unknown,
                 [latest[n] for n in expected if n in latest] + [latest[n] for n in unknown],
                 _kind(tasks))
