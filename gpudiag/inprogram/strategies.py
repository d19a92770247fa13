"""Every tf.distribute strategy the program creates: class, replicas, devices, all-reduce.

``StrategyBase.__init__`` (the base of every strategy, TF2 and tf.compat.v1) is wrapped:
after it ran, the strategy's class, ``num_replicas_in_sync``, ``extended.worker_devices``
and ``parameter_devices``, the cross-device ops (class; for collectives the implementation,
RING or NCCL), whether NCCL is used, and for multi-worker strategies the cluster and this
task are recorded, with where in the program it was created. TensorFlow's own log lines
about the strategy come through gpudiag.inprogram.logcapture.

Joining a cluster is recorded on its own, *before* TensorFlow connects: a multi-worker
strategy's constructor blocks until every task of the cluster has connected (forever, when
one never starts), so the strategy record above may never come. Three places are wrapped:
MultiWorkerMirroredStrategy's ``_initialize_multi_worker`` (the collective cluster),
ParameterServerStrategy's ``_connect_to_cluster`` (the coordinator) and
``tf.distribute.Server`` (the parameter servers' and workers' servers). Each writes a
``cluster_join`` event (the task and the cluster spec) before, and ``cluster_join_ended``
(joined, or failed when the call raised) after.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import patch, unwrapped, wrap_once
from gpudiag.inprogram.tfhooks import caller, record_devices
from gpudiag.layout import events
from gpudiag.records.tfconfig import coordination_leader_of

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent


def _names(devices: Any) -> list[str] | None:
    try:
        return [str(d) for d in devices]
    except Exception:
        return None


def describe(strategy: Any) -> dict[str, Any]:
    extended = strategy.extended
    ops = getattr(extended, "_cross_device_ops", None)
    options = getattr(extended, "_communication_options", None)
    implementation = getattr(getattr(options, "implementation", None), "name", None)
    ops_name = type(ops).__name__ if ops is not None else None
    worker_devices = _names(getattr(extended, "worker_devices", ()))
    nccl = bool(ops_name and "Nccl" in ops_name) or (
        ops_name == "CollectiveAllReduce" and implementation == "NCCL"
        and bool(worker_devices) and all("GPU" in d.upper() for d in worker_devices or []))
    out: dict[str, Any] = {
        "class_name": type(strategy).__name__, "module": type(strategy).__module__,
        "num_replicas_in_sync": getattr(strategy, "num_replicas_in_sync", None),
        "worker_devices": worker_devices,
        "parameter_devices": _names(getattr(extended, "parameter_devices", ())),
        "cross_device_ops": ops_name, "communication_implementation": implementation,
        "nccl": nccl,
    }
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None:
        out["cluster"] = {"task_type": getattr(resolver, "task_type", None),
                          "task_id": getattr(resolver, "task_id", None),
                          "cluster_spec": _as_spec(resolver.cluster_spec())}
    return out


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.distribute import distribute_lib

    wrap_once(distribute_lib.StrategyBase, "__init__", lambda original: _init(agent, original))


def _init(agent: Agent, original: Callable[..., Any]) -> Callable[..., Any]:
    """StrategyBase.__init__, each strategy the program makes recorded (not TensorFlow's
    own default one)."""

    @functools.wraps(original)
    def __init__(self: Any, extended: Any) -> None:
        original(self, extended)
        if type(self).__name__.startswith("_"):  # TensorFlow's own default strategy
            return
        try:
            agent.emit(events.Strategy(caller=caller(), **describe(self)))
        except Exception as exc:
            agent.hook_error("recording a strategy", exc)
        record_devices("strategy")

    return __init__


def _as_spec(cluster: Any) -> dict[str, list[str]] | None:
    """A ClusterSpec as {job: [address, ...]} (a sparse job's tasks in index order)."""
    try:
        raw = cluster.as_dict()
    except Exception:
        return None
    out = {}
    for job, tasks in raw.items():
        out[str(job)] = ([str(tasks[k]) for k in sorted(tasks)] if isinstance(tasks, dict)
                         else [str(t) for t in tasks])
    return out


def _collective(self: Any, cluster_resolver: Any) -> dict[str, Any]:
    return {"via": "MultiWorkerMirroredStrategy", "task_type": cluster_resolver.task_type,
            "task_id": cluster_resolver.task_id,
            "cluster_spec": _as_spec(cluster_resolver.cluster_spec())}


def _coordinator(self: Any, coordinator_name: str) -> dict[str, Any]:
    resolver = self._cluster_resolver
    return {"via": "ParameterServerStrategy", "task_type": coordinator_name,
            "task_id": getattr(resolver, "task_id", None) or 0,
            "cluster_spec": _as_spec(resolver.cluster_spec())}


def _server(self: Any, server_or_cluster_def: Any, job_name: Any = None,
            task_index: Any = None, protocol: Any = None, config: Any = None,
            start: bool = True) -> dict[str, Any]:
    from tensorflow.python.training import server_lib

    server_def = server_lib._make_server_def(server_or_cluster_def, job_name, task_index,
                                             protocol, config)
    return {"via": "tf.distribute.Server", "task_type": server_def.job_name,
            "task_id": server_def.task_index,
            "cluster_spec": _as_spec(server_lib.ClusterSpec(server_def.cluster))}


NOT_LEADER_NO_PROFILE = (
    "no profiler window in {task}: in a MultiWorkerMirroredStrategy cluster only the "
    "coordination leader ({leader}) is traced. TensorFlow 2.21's profiler aborted a worker "
    "that was not the leader (free(): invalid pointer) as it stopped, in 4 of 64 two-worker "
    "runs on this project's machine; tracing the leader alone, 0 of 80")


def _forgo_profile(agent: Agent, info: dict[str, Any]) -> None:
    """A MultiWorkerMirroredStrategy task other than the coordination leader: no profiler
    window (NOT_LEADER_NO_PROFILE)."""
    leader = coordination_leader_of(info["cluster_spec"] or {})
    task = f"{info['task_type']}-{info['task_id']}"
    if info["via"] == "MultiWorkerMirroredStrategy" and agent.profile is not None \
            and leader is not None and task != leader:
        agent.profile.forgo(NOT_LEADER_NO_PROFILE.format(task=task, leader=leader))


#: Joins whose work runs in TensorFlow servers (a parameter-server cluster, TF1
#: between-graph replication): the program's run metadata does not see the ops the servers
#: execute, TensorFlow's placement log does (with each task's full device name).
SERVER_JOINS = ("ParameterServerStrategy", "tf.distribute.Server")


def _ask_placement_log(agent: Agent, info: dict[str, Any]) -> None:
    """For a server or parameter-server process, ask for TensorFlow's placement log (before
    its context initialises: later it would log nothing). Its lines stay out of the
    terminal (the parent filters them) and cost a line per op placed for the whole run:
    the price of knowing which task ran what (docs/cluster-programs.md)."""
    tf = agent.tf
    if info["via"] not in SERVER_JOINS or tf is None or not agent.config.placement_log:
        return
    from tensorflow.python.eager import context

    ctx = context.context_safe()
    if ctx is not None and getattr(ctx, "_context_handle", None) is not None:
        return  # initialised: too late to turn it on
    if not tf.debugging.get_log_device_placement():
        # TensorFlow's own function, not the wrapper that records the program's tf.config
        # calls: this call is gpudiag's (not a call at the program's line, and its lines
        # are not the program's asking to see them)
        setter = tf.debugging.set_log_device_placement
        getattr(setter, "__gpudiag_wrapped__", setter)(True)
        agent.placement_log_asked = True
        agent.emit(events.PlacementLogAsked(reason=f"joined a cluster via {info['via']}"))


def _wrap_join(agent: Agent, owner: type, name: str,
               identify: Callable[..., dict[str, Any]]) -> None:
    original = unwrapped(owner, name)
    if original is None:
        return

    @functools.wraps(original)
    def joining(self: Any, *args: Any, **kwargs: Any) -> Any:
        info = None
        try:
            info = identify(self, *args, **kwargs)
            agent.emit(events.ClusterJoin(caller=caller(), **info))
            _forgo_profile(agent, info)
            _ask_placement_log(agent, info)
        except Exception as exc:
            agent.hook_error(f"recording the cluster joined by {owner.__name__}", exc)
        try:
            result = original(self, *args, **kwargs)
        except BaseException:  # the exception itself is the program's (gpudiag.inprogram.crash)
            if info is not None:
                agent.emit(events.ClusterJoinEnded(via=info["via"], outcome="failed"))
            raise
        if info is not None:
            agent.emit(events.ClusterJoinEnded(via=info["via"]))
            if info["via"] == "MultiWorkerMirroredStrategy":  # servers never step
                from gpudiag.inprogram import stallwatch
                from gpudiag.inprogram.agent import guard

                guard("arming the stall watch", stallwatch.arm)
        return result

    patch(owner, name, joining, wraps=original)


def install_cluster(agent: Agent, tf: ModuleType) -> None:
    """Wrap the three ways a process joins a cluster (see the module's docstring)."""
    from tensorflow.python.distribute import (
        collective_all_reduce_strategy,
        parameter_server_strategy_v2,
    )
    from tensorflow.python.training import server_lib

    _wrap_join(agent, collective_all_reduce_strategy.CollectiveAllReduceExtended,
               "_initialize_multi_worker", _collective)
    _wrap_join(agent, parameter_server_strategy_v2.ParameterServerStrategyV2,
               "_connect_to_cluster", _coordinator)
    _wrap_join(agent, server_lib.Server, "__init__", _server)
