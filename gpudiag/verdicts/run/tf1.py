"""TF1 distribution named by what the program built (pure: plain records in, text out).

The program's tf.compat.v1 constructs (gpudiag.inprogram.tf1dist: replica_device_setter,
MonitoredTrainingSession, Supervisor, SyncReplicasOptimizer, each tower's
compute_gradients, apply_gradients), set against where TensorFlow placed the work
(its placement log per cluster task, a traced Session.run's step stats per device):

- **between-graph replication**: each worker's own graph under replica_device_setter
  (variables on the ps tasks, ops on the worker), trained in a MonitoredTrainingSession
  or under a Supervisor; asynchronous, or synchronous through SyncReplicasOptimizer;
- **in-graph replication**: one graph whose towers each computed gradients on a device of
  their own (compute_gradients with the loss pinned to /gpu:0, /gpu:1, ...), the towers'
  gradients combined (a Mean: averaged; an AddN: summed) and applied once.

Never named after a TF2 strategy: ParameterServerStrategy is TF2's coordinator API,
another program.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.events import Tf1Distribution
from gpudiag.layout.loopevents import StepStats

BETWEEN_GRAPH_APIS = ("replica_device_setter", "MonitoredTrainingSession", "Supervisor",
                      "SyncReplicasOptimizer")
COMBINED = {"Mean": "averaged", "AddN": "summed", "AddV2": "summed", "Add": "summed",
            "RealDiv": "averaged", "Sum": "summed"}


def task_constructs(calls: Sequence[Tf1Distribution]) -> list[dict[str, Any]]:
    """The between-graph constructs of a process, as a TaskReport keeps them: one
    {api, where, ...args} each (the cluster spec and TensorFlow's op lists left out)."""
    out = []
    for c in calls:
        if c.api in BETWEEN_GRAPH_APIS:
            args = dict(c.args)
            out.append({"api": c.api, "where": c.where, **args})
    return out


def _task_device(task: str) -> str:
    job, _, index = task.rpartition("-")
    return f"/job:{job}/task:{index}"


def _first(constructs: Sequence[dict[str, Any]], api: str) -> dict[str, Any] | None:
    return next((c for c in constructs if c["api"] == api), None)


def sync_of(constructs: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return _first(constructs, "SyncReplicasOptimizer")


def mode_text(constructs: Sequence[dict[str, Any]], sync_in_log: bool) -> str:
    sync = sync_of(constructs)
    if sync is not None:
        return (f"synchronous: SyncReplicasOptimizer at {sync['where']} aggregating "
                f"{sync.get('replicas_to_aggregate')} gradient(s) per update"
                + (f" of {sync['total_num_replicas']} replica(s)"
                   if sync.get("total_num_replicas") is not None else "")
                + ", the chief applies each round")
    if sync_in_log:
        return ("synchronous: TensorFlow's placement log placed SyncReplicasOptimizer's "
                "queues (its constructor was not seen)")
    return ("asynchronous: each worker applies its own updates to the variables on the "
            "parameter servers as it goes, waiting for no other worker (no "
            "SyncReplicasOptimizer)")


def between_graph(constructs: Sequence[dict[str, Any]], *, sync_in_log: bool,
                  variables: dict[str, int], ops: dict[str, dict[str, int]],
                  workers: Sequence[str], chiefs: Sequence[str] = ()) -> str | None:
    """``between-graph replication (replica_device_setter at f.py:52: variables on
    /job:ps/task:0 (3), ops on each worker (worker-0 135, worker-1 135);
    MonitoredTrainingSession at f.py:92, chief worker-0; asynchronous: ...)``, or None
    when no between-graph construct was recorded. ``variables`` and ``ops`` are what
    TensorFlow's placement log placed per task; ``workers`` the spec's worker tasks."""
    if not any(c["api"] in BETWEEN_GRAPH_APIS for c in constructs):
        return None
    parts = []
    setter = _first(constructs, "replica_device_setter")
    if setter is not None:
        text = f"replica_device_setter at {setter['where']}"
        if setter.get("ps_tasks") == 0:
            text += " with no ps task (it returned no device function)"
        else:
            text += (f" ({setter.get('ps_tasks')} ps task(s), variables to "
                     f"{setter.get('ps_device')}, ops to {setter.get('worker_device')})")
        placed = []
        if variables:
            placed.append("variables on " + ", ".join(
                f"{_task_device(t)} ({n})" for t, n in variables.items()))
        worker_ops = {w: sum(ops.get(w, {}).values()) for w in workers}
        if any(worker_ops.values()):
            ran = ", ".join(f"{w} {n}" for w, n in worker_ops.items() if n)
            idle = [w for w, n in worker_ops.items() if not n]
            placed.append(f"ops on {ran}" + (f" (none placed on {', '.join(idle)} in the logs "
                                             "seen)" if idle else "") if idle or len(workers) < 2
                          else f"ops on each worker ({ran})")
        text += (": " + ", ".join(placed) + " (TensorFlow's placement log)") if placed \
            else ": no placement seen"
        parts.append(text)
    session = _first(constructs, "MonitoredTrainingSession") or _first(constructs,
                                                                       "Supervisor")
    if session is not None:
        text = f"{session['api']} at {session['where']}"
        if chiefs:
            text += f", chief {', '.join(chiefs)}"
        parts.append(text)
    parts.append(mode_text(constructs, sync_in_log))
    return "between-graph replication (" + "; ".join(parts) + ")"


def chiefs_of(tasks: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> list[str]:
    """The tasks whose MonitoredTrainingSession or Supervisor was given is_chief=True."""
    return [task for task, constructs in tasks for c in constructs
            if c["api"] in ("MonitoredTrainingSession", "Supervisor") and c.get("is_chief")]


# ------------------------------------------------------------------ in-graph towers
def _ran_on(device: str, step_stats: Sequence[StepStats]) -> list[str]:
    """Where a traced Session.run ran the ops pinned to ``device``."""
    found: dict[str, int] = {}
    for s in step_stats:
        for p in s.pinned:
            if p.get("requested") == device:
                found[p["actual"]] = found.get(p["actual"], 0) + int(p.get("nodes") or 0)
    return sorted(found, key=lambda d: -found[d])


def _variables_ran_on(ops: Sequence[str], step_stats: Sequence[StepStats]) -> list[str]:
    found: dict[str, int] = {}
    for s in step_stats:
        for op in ops:
            device = s.node_devices.get(op)
            if device:
                found[device] = found.get(device, 0) + 1
        if found:
            break
    return sorted(found, key=lambda d: -found[d])


def in_graph(calls: Sequence[Tf1Distribution], step_stats: Sequence[StepStats]
             ) -> tuple[str, dict[str, Any]] | None:
    """In-graph replication, when one graph's compute_gradients ran on two or more
    devices (one tower each): the towers, how their gradients were combined and applied,
    where the variables live and where the towers' ops ran (a traced run's step stats)."""
    towers: dict[int, list[Tf1Distribution]] = {}
    for c in calls:
        if c.api == "compute_gradients" and c.args.get("device"):
            towers.setdefault(int(c.args.get("graph") or 0), []).append(c)
    graph, mine = max(towers.items(), key=lambda kv: len({c.args["device"] for c in kv[1]}),
                      default=(0, []))
    devices = list(dict.fromkeys(str(c.args["device"]) for c in mine))
    if len(devices) < 2:
        return None
    scopes = [str(c.args.get("scope") or "") for c in mine]
    text = (f"in-graph replication: {len(mine)} towers on {', '.join(devices)} "
            f"(compute_gradients at {mine[0].where}"
            + (f", name scopes {', '.join(s for s in scopes if s)}" if any(scopes) else "")
            + ")")
    apply = next((c for c in calls if c.api == "apply_gradients"
                  and c.args.get("graph") == graph and c.args.get("towers_combined_max")),
                 None)
    evidence: dict[str, Any] = {"towers": [{"device": c.args["device"], "scope":
                                            c.args.get("scope"), "where": c.where}
                                           for c in mine]}
    if apply is None:
        text += ", gradients: no apply_gradients combined the towers' gradients (seen)"
    else:
        a = apply.args
        ops = a.get("combine_ops") or {}
        how = sorted({COMBINED.get(op, f"combined by {op}") for op in ops}) or ["combined"]
        by_op = ", ".join(f"{op} x{n}" for op, n in ops.items())
        text += (f", gradients {' and '.join(how)} ({by_op}"
                 f" over {a.get('towers_combined')} tower(s)' gradients) and applied once "
                 f"at {apply.where} to {a.get('variables')} variable(s)")
        pinned = [d or "(no device)" for d in (a.get("variable_devices") or {})]
        ran = _variables_ran_on(a.get("variable_ops") or [], step_stats)
        text += f"; variables pinned to {', '.join(pinned)}" + (
            f", ran on {', '.join(ran)}" if ran else "")
        evidence.update(combine_ops=ops, variables=a.get("variables"),
                        variable_devices=a.get("variable_devices"), variables_ran_on=ran)
    ran_on = {d: _ran_on(d, step_stats) for d in devices}
    if any(ran_on.values()):
        moved = {d: r for d, r in ran_on.items() if r and r != [d]}
        text += "; the towers' ops ran on " + ", ".join(
            f"{d} -> {', '.join(r) or 'not traced'}" for d, r in ran_on.items())
        if moved:
            text += (" (not the devices the towers were given: soft placement moved them; "
                     "run.soft-placement says why)")
        evidence["towers_ran_on"] = ran_on
    return text, evidence
