"""A parameter-server coordinator's findings with the work counted where it ran.

A ParameterServerStrategy coordinator runs almost nothing itself: its ClusterCoordinator
sends every step to a worker, and every variable lives on a parameter server. Its own
placement log names those remote devices in full (readers.clusterplacement), so the
distribution and device findings of the coordinator's process are restated per task of
the cluster instead of folding /job:worker and /job:ps into its CPU:0. Pure: plain data in,
findings out.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.readers.clusterplacement import listing
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import tf1

PSS_CLASSES = frozenset({"ParameterServerStrategyV2", "ParameterServerStrategy",
                         "ParameterServerStrategyV1"})
ASYNC = ("asynchronous: the coordinator dispatches each step to whichever worker is free, "
         "the worker reads the variables from the parameter servers and applies its own "
         "update there, waiting for no other worker")


def coordinator(obs: ProcessObservation) -> bool:
    """The process created a ParameterServerStrategy (it is the coordinator)."""
    return any(s.class_name in PSS_CLASSES for s in obs.strategies)


def between_graph_worker(obs: ProcessObservation) -> str | None:
    """``worker-1`` when the process is a worker of TF1 between-graph replication: it
    started a tf.compat.v1 Server as a worker and ran its own Sessions, no strategy."""
    if obs.strategies or not obs.sessions:
        return None
    for join in reversed(obs.cluster_joins):
        if join.via == "tf.distribute.Server" and join.task_type == "worker":
            return f"worker-{join.task_id}"
    return None


def cluster_process(obs: ProcessObservation) -> bool:
    """Its work ran on a cluster's tasks: a coordinator, or a between-graph worker."""
    return coordinator(obs) or between_graph_worker(obs) is not None


def _spec(obs: ProcessObservation) -> dict[str, list[str]]:
    for join in reversed(obs.cluster_joins):
        if join.cluster_spec and join.via in ("ParameterServerStrategy",
                                              "tf.distribute.Server"):
            return join.cluster_spec
    return {}


def _between_graph(base: Finding, obs: ProcessObservation, me: str,
                   by_task: dict[str, dict[str, int]], variables: dict[str, int]) -> Finding:
    spec = _spec(obs)
    mine = {t: d for t, d in by_task.items() if t == me}
    ps = _tasks(by_task, "ps")
    constructs = tf1.task_constructs(obs.tf1_calls)
    scheme = tf1.between_graph(
        constructs, sync_in_log=False, variables=variables, ops=by_task, workers=[me],
        chiefs=tf1.chiefs_of([(me, constructs)])) or "between-graph replication"
    text = (f"no tf.distribute strategy (tf.compat.v1): {scheme}; this "
            f"process {me} of {len(spec.get('worker', []))} worker(s) and "
            f"{len(spec.get('ps', []))} parameter server(s). TensorFlow's placement log: "
            f"compute on {listing(mine) or me + ' none'}; parameter servers "
            f"{listing(ps) or 'none'}")
    if variables and not constructs:
        text += "; variables on " + ", ".join(f"{k} {n}" for k, n in variables.items())
    steps = local_and_global(obs)
    if steps["local_steps"]:
        text += f"; {me} ran {counted(steps['local_steps'], 'local step')} ({steps['loop']}), " + (
            f"global step {steps['global_step']} when it last fetched it"
            if steps["global_step"] is not None else
            f"global step not observed ({steps['global_step_skipped']})")
    return replace(base, message=text, title=title(
        f"tf.compat.v1 {scheme}: {me} of {len(spec.get('worker', []))} worker(s)",
        f"tf.compat.v1 between-graph replication: {me}", "tf.compat.v1 between-graph "
        "replication"), evidence={
        **base.evidence, "between_graph_task": me, "ops_by_task": by_task,
        "variables_by_task": variables, "steps": steps, "tf1_constructs": constructs})


def local_and_global(obs: ProcessObservation) -> dict[str, Any]:
    """The steps this process's longest Session.run loop ran, and the graph's global step
    its runs fetched last (only what was observed; the reason when it was not)."""
    loops = [s for s in obs.series if s.kind == "session" and s.steps]
    top = max(loops, key=lambda s: (sum(st.count for st in s.steps),
                                    any(st.loss is not None for st in s.steps)), default=None)
    if top is None:
        return {"loop": None, "local_steps": 0, "global_step": None,
                "global_step_skipped": "no Session.run loop"}
    gstep = top.facts.get("global_step")
    return {"loop": top.label.split(" [", 1)[0], "local_steps": max(st.index for st in
                                                                    top.steps) + 1,
            "global_step": gstep, "global_step_first": top.facts.get("global_step_first"),
            "global_step_skipped": None if gstep is not None
            else "its runs fetched no global_step"}


def _tasks(by_task: dict[str, dict[str, int]], job: str) -> dict[str, dict[str, int]]:
    return {t: d for t, d in by_task.items() if t.rsplit("-", 1)[0] == job}


def distribution(base: Finding, obs: ProcessObservation, by_task: dict[str, dict[str, int]],
                 variables: dict[str, int]) -> Finding:
    """run.distribution of a coordinator: asynchronous, which workers ran the steps and
    which parameter servers hold the variables, from TensorFlow's placement log."""
    me = between_graph_worker(obs)
    if me is not None and by_task and base.status == "ok":
        return _between_graph(base, obs, me, by_task, variables)
    if not coordinator(obs) or not by_task:
        return base
    spec = _spec(obs)
    s = next(s for s in obs.strategies if s.class_name in PSS_CLASSES)
    where = f" at {s.caller['file'].rsplit('/', 1)[-1]}:{s.caller['line']}" if s.caller else ""
    workers, ps = _tasks(by_task, "worker"), _tasks(by_task, "ps")
    text = (f"ParameterServerStrategy{where} ({ASYNC}); cluster: "
            f"{len(spec.get('worker', []))} worker(s), {len(spec.get('ps', []))} parameter "
            f"server(s), this process the coordinator. TensorFlow's placement log: steps ran "
            f"on {listing(workers) or 'no worker'}; parameter servers "
            f"{listing(ps) or 'none'}")
    if variables:
        text += "; variables created on " + ", ".join(f"{k} {n}" for k, n in variables.items())
    others = {t: d for t, d in by_task.items() if t not in workers and t not in ps}
    if others:
        text += f"; also {listing(others)}"
    evidence: dict[str, Any] = {**base.evidence, "mode": "asynchronous",
                                "ops_by_task": by_task, "variables_by_task": variables}
    if base.status != "ok":
        text = f"{text}. {base.message.split('. ', 1)[-1]}"
    return replace(base, message=text, evidence=evidence, title=title(
        f"ParameterServerStrategy: {len(workers)} worker(s), {len(ps)} parameter server(s)",
        "ParameterServerStrategy") if base.status == "ok" else base.title)


def devices_used(base: Finding, obs: ProcessObservation,
                 by_task: dict[str, dict[str, int]]) -> Finding:
    """run.every-device-used of a coordinator: every worker and parameter server of the
    spec got work (fail naming those that did not), each with its ops."""
    if between_graph_worker(obs) is not None and by_task:
        head = base.message.split(";", 1)[0]
        return replace(base, evidence={**base.evidence, "ops_by_task": by_task},
                       message=f"{head}; TensorFlow's placement log placed this worker's "
                               f"graph on: {listing(by_task)}")
    if not coordinator(obs) or not by_task:
        return base
    spec = _spec(obs)
    expected = [f"{job}-{i}" for job in ("worker", "ps") for i in range(len(spec.get(job, [])))]
    idle = [t for t in expected if not sum(by_task.get(t, {}).values())]
    evidence = {**base.evidence, "ops_by_task": by_task, "idle_tasks": idle}
    head = base.message.split(";", 1)[0]
    if idle:
        return replace(base, status="fail", evidence=evidence,
                       message=f"{head}; {', '.join(idle)} did no work (no op placed there); "
                            f"worked: {listing(by_task)}",
                       advice="A worker the coordinator never used was not reachable or "
                              "joined late (its log says why); schedule at least as many "
                              "steps as there are workers.")
    return replace(base, evidence=evidence,
                   message=f"{head}; every worker and parameter server did work "
                        f"(TensorFlow's placement log): {listing(by_task)}")
