"""The tf.compat.v1 distribution constructs the program builds, recorded (in-program).

TF1 programs distribute work without tf.distribute: between-graph replication (each
worker builds its own graph under ``tf.compat.v1.train.replica_device_setter``, which puts
the variables on the ``ps`` job and the ops on the worker, and trains in a
``MonitoredTrainingSession`` or under a ``Supervisor``, asynchronously or through
``SyncReplicasOptimizer``), and in-graph replication (one graph, one tower per device under
``tf.device('/gpu:%d' % i)``, each tower's ``opt.compute_gradients(loss)``, the towers'
gradients combined and applied once: tensorflow/models' cifar10_multi_gpu_train.py).

Wrapped once when the program imports TensorFlow, each call recorded as a
``tf1_distribution`` event (the api, what it was given, the program's line), then passed to
TensorFlow unchanged; a failure inside gpudiag's part is a hook error, never the
program's:

- ``replica_device_setter``: the ps tasks it resolved (its argument, or the ps job of
  ``cluster``), the ps and worker devices;
- ``MonitoredTrainingSession``: ``is_chief`` and ``master`` (recorded before it runs: it
  blocks while its Session waits for the other tasks);
- ``Supervisor``: ``is_chief``; ``SyncReplicasOptimizer``: ``replicas_to_aggregate``,
  ``total_num_replicas`` and the optimizer it wraps;
- ``Optimizer.compute_gradients``: the device the loss was pinned to and its name scope
  (one tower each), the graph;
- ``Optimizer.apply_gradients``: for the gradients it was given, how many of the towers'
  ``compute_gradients`` results each one was computed from (a bounded walk back through
  the graph's inputs, at most WALK_OPS ops per gradient) and the op that combined them
  (``Mean``: averaged; ``AddN``: summed), and where the variables were pinned.

A call TensorFlow makes inside another recorded call (SyncReplicasOptimizer's own
``compute_gradients`` calling its inner optimizer's) is recorded once, at the outer call.
Costs: a few Python calls per constructor, and one bounded graph walk per
``apply_gradients``, while the graph is built; nothing per step.
"""

from __future__ import annotations

import functools
import threading
from collections import Counter
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram.agent import patch
from gpudiag.inprogram.tfhooks import caller
from gpudiag.layout import events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

WALK_OPS = 400  # ops visited per gradient, back from apply_gradients' input
MAX_GRADIENTS = 5000  # gradient tensors remembered from compute_gradients calls
MAX_VARIABLE_OPS = 200


class _State:
    def __init__(self) -> None:
        self.local = threading.local()
        # gradient tensor name -> (graph id, tower index): what each compute_gradients
        # call returned, to tell which towers an applied gradient was computed from
        self.grads: dict[str, tuple[int, int]] = {}
        self.towers: dict[int, int] = {}  # graph id -> compute_gradients calls so far

    def depth(self) -> int:
        return int(getattr(self.local, "depth", 0))

    def enter(self) -> None:
        self.local.depth = self.depth() + 1

    def leave(self) -> None:
        self.local.depth = max(0, self.depth() - 1)


def _setter_args(result: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """What replica_device_setter resolved (its chooser's fields: the ps tasks it counted
    in ``cluster`` or was given), or ps_tasks 0 (it returned no device function)."""
    chooser = getattr(result, "__self__", None)
    out: dict[str, Any] = {"cluster_given": kwargs.get("cluster") is not None}
    if chooser is None:
        out.update(ps_tasks=0)
        return out
    out.update(ps_tasks=getattr(chooser, "_ps_tasks", None),
               ps_device=getattr(chooser, "_ps_device", None),
               worker_device=getattr(chooser, "_worker_device", None))
    return out


def _bind(fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
          ) -> dict[str, Any]:
    import inspect

    bound = inspect.signature(fn).bind_partial(*args, **kwargs)
    return dict(bound.arguments)


def _tensor_device(tensor: Any) -> tuple[str, str, int]:
    op = tensor.op
    name = op.name
    return str(op.device or ""), name.rsplit("/", 1)[0] if "/" in name else "", id(op.graph)


def _grads_of(result: Any) -> list[Any]:
    try:
        return [g for g, _ in result if g is not None]
    except Exception:
        return []


def _tensor_of(grad: Any) -> Any:
    return getattr(grad, "values", grad)  # an IndexedSlices' values


def _towers_reached(state: _State, grad: Any, graph_id: int) -> set[int]:
    """The towers (compute_gradients calls of this graph) whose gradients ``grad`` was
    computed from: a walk back through the ops' inputs, at most WALK_OPS ops."""
    found: set[int] = set()
    stack = [_tensor_of(grad)]
    seen: set[str] = set()
    while stack and len(seen) < WALK_OPS:
        tensor = stack.pop()
        name = tensor.name
        if name in seen:
            continue
        seen.add(name)
        tower = state.grads.get(name)
        if tower is not None and tower[0] == graph_id:
            found.add(tower[1])
            continue
        stack.extend(tensor.op.inputs)
    return found


def _graph_mode() -> bool:
    from tensorflow.python.eager import context

    return not context.executing_eagerly()


def _apply_args(state: _State, grads_and_vars: Any) -> dict[str, Any]:
    pairs = [(g, v) for g, v in list(grads_and_vars) if g is not None]
    if not _graph_mode():  # eager: no graph to walk, no tower
        return {"eager": True, "variables": len(pairs)}
    graph_id = id(pairs[0][1].graph) if pairs else 0
    reached = [_towers_reached(state, g, graph_id) for g, _ in pairs]
    combined = [len(r) for r in reached]
    ops = Counter(_tensor_of(g).op.type for (g, _), r in zip(pairs, reached, strict=True)
                  if len(r) > 1)
    devices = Counter(str(v.device or "") for _, v in pairs)
    return {"graph": graph_id, "variables": len(pairs),
            "towers": state.towers.get(graph_id, 0),
            "towers_combined": min(combined) if combined else 0,
            "towers_combined_max": max(combined) if combined else 0,
            "combine_ops": dict(ops), "variable_devices": dict(devices),
            "variable_ops": [v.op.name for _, v in pairs][:MAX_VARIABLE_OPS]}


def _compute_args(state: _State, loss: Any, result: Any) -> dict[str, Any]:
    if not _graph_mode() or not hasattr(loss, "op"):  # eager, or a callable loss
        return {"eager": True, "variables": len(_grads_of(result))}
    device, scope, graph_id = _tensor_device(loss)
    tower = state.towers.get(graph_id, 0)
    state.towers[graph_id] = tower + 1
    grads = _grads_of(result)
    for g in grads:
        if len(state.grads) < MAX_GRADIENTS:
            state.grads[_tensor_of(g).name] = (graph_id, tower)
    return {"device": device, "scope": scope, "graph": graph_id, "tower": tower,
            "variables": len(grads)}


class _Recorder:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.state = _State()

    def emit(self, api: str, args: dict[str, Any], where: dict[str, Any] | None) -> None:
        self.agent.emit(events.Tf1Distribution(api=api, args=args, caller=where))

    def wrap(self, api: str, original: Callable[..., Any],
             before: Callable[[dict[str, Any]], dict[str, Any]] | None = None,
             after: Callable[[dict[str, Any], Any], dict[str, Any]] | None = None
             ) -> Callable[..., Any]:
        """``original`` recorded: ``before(bound args)`` before it runs (a call that may
        block), or ``after(bound args, result)`` once it returned; outermost call only."""
        state = self.state

        @functools.wraps(original)
        def recorded(*args: Any, **kwargs: Any) -> Any:
            outer = state.depth() == 0
            where, bound = None, None
            if outer:
                try:
                    where = caller()
                    bound = _bind(original, args, kwargs)
                    if before is not None:
                        self.emit(api, before(bound), where)
                except Exception as exc:
                    self.agent.hook_error(f"recording {api}", exc)
                    bound = None
            state.enter()
            try:
                result = original(*args, **kwargs)
            finally:
                state.leave()
            if outer and after is not None and bound is not None:
                try:
                    self.emit(api, after(bound, result), where)
                except Exception as exc:
                    self.agent.hook_error(f"recording {api}", exc)
            return result

        recorded.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
        return recorded


def _replace(owners: list[Any], name: str, wrapped: Callable[..., Any],
             original: Any) -> None:
    """Put ``wrapped`` where the program finds ``original``: its defining module and the
    public API module (tf.compat.v1.train holds its own reference)."""
    for owner in owners:
        if owner is not None and getattr(owner, name, None) is original:
            patch(owner, name, wrapped)


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.training import (
        device_setter,
        monitored_session,
        optimizer,
        supervisor,
        sync_replicas_optimizer,
    )

    if hasattr(device_setter.replica_device_setter, "__gpudiag_wrapped__"):
        return
    rec = _Recorder(agent)
    state = rec.state
    api = getattr(getattr(tf, "compat", None), "v1", None)
    train = getattr(api, "train", None)

    setter = device_setter.replica_device_setter
    wrapped = rec.wrap("replica_device_setter", setter,
                       after=lambda b, result: _setter_args(result, b))
    _replace([device_setter, train], "replica_device_setter", wrapped, setter)

    mts = monitored_session.MonitoredTrainingSession
    wrapped = rec.wrap("MonitoredTrainingSession", mts, before=lambda b: {
        "is_chief": bool(b.get("is_chief", True)), "master": str(b.get("master", "")),
        "hooks": [type(h).__name__ for h in b.get("hooks") or []][:20],
        "checkpoint_dir": b.get("checkpoint_dir") is not None})
    _replace([monitored_session, train], "MonitoredTrainingSession", wrapped, mts)

    sv_init = supervisor.Supervisor.__init__
    patch(supervisor.Supervisor, "__init__", rec.wrap("Supervisor", sv_init, before=lambda b: {
        "is_chief": bool(b.get("is_chief", True)), "logdir": b.get("logdir") is not None}))

    sync_init = sync_replicas_optimizer.SyncReplicasOptimizer.__init__
    patch(sync_replicas_optimizer.SyncReplicasOptimizer, "__init__", rec.wrap(
        "SyncReplicasOptimizer", sync_init, after=lambda b, _: {
            "replicas_to_aggregate": b.get("replicas_to_aggregate"),
            "total_num_replicas": b.get("total_num_replicas"),
            "optimizer": type(b.get("opt")).__name__}))

    cls = optimizer.Optimizer
    patch(cls, "compute_gradients", rec.wrap(
        "compute_gradients", cls.compute_gradients,
        after=lambda b, result: _compute_args(state, b["loss"], result)))
    patch(cls, "apply_gradients", rec.wrap(
        "apply_gradients", cls.apply_gradients,
        after=lambda b, _: _apply_args(state, b["grads_and_vars"])))
