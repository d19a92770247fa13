"""Every tf.distribute strategy the program creates: class, replicas, devices, all-reduce.

``StrategyBase.__init__`` (the base of every strategy, TF2 and tf.compat.v1) is wrapped:
after it ran, the strategy's class, ``num_replicas_in_sync``, ``extended.worker_devices``
and ``parameter_devices``, the cross-device ops (class; for collectives the implementation,
RING or NCCL), whether NCCL is used, and for multi-worker strategies the cluster and this
task are recorded, with where in the program it was created. TensorFlow's own log lines
about the strategy come through gpudiag.run.logcapture.
"""

from __future__ import annotations

import functools
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.run.tfhooks import caller, record_devices

if TYPE_CHECKING:
    from gpudiag.run.agent import Agent


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
        "class": type(strategy).__name__, "module": type(strategy).__module__,
        "num_replicas_in_sync": getattr(strategy, "num_replicas_in_sync", None),
        "worker_devices": worker_devices,
        "parameter_devices": _names(getattr(extended, "parameter_devices", ())),
        "cross_device_ops": ops_name, "communication_implementation": implementation,
        "nccl": nccl,
    }
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is not None:
        try:
            spec = resolver.cluster_spec().as_dict()
        except Exception:
            spec = None
        out["cluster"] = {"task_type": getattr(resolver, "task_type", None),
                          "task_id": getattr(resolver, "task_id", None),
                          "cluster_spec": spec}
    return out


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.distribute import distribute_lib

    cls = distribute_lib.StrategyBase
    original = cls.__init__
    if hasattr(original, "__gpudiag_wrapped__"):
        return

    @functools.wraps(original)
    def __init__(self: Any, extended: Any) -> None:
        original(self, extended)
        if type(self).__name__.startswith("_"):  # TensorFlow's own default strategy
            return
        try:
            agent.emit("strategy", caller=caller(), **describe(self))
        except Exception as exc:
            agent.hook_error("recording a strategy", exc)
        record_devices("strategy")

    __init__.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
    cls.__init__ = __init__
