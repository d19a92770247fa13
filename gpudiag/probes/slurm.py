"""Slurm probe: TensorFlow's SlurmClusterResolver turns this job step into a TF_CONFIG.

`gpudiag worker --slurm` runs it in a short child before the task itself: the
resolver reads SLURM_PROCID, SLURM_STEP_NUM_TASKS, SLURM_STEP_NODELIST and
SLURM_STEP_TASKS_PER_NODE, orders the nodes by name, gives the tasks on a node ports
``port_base``, ``port_base + 1`` ..., and (with GPUs) splits each node's GPUs between
its tasks through CUDA_VISIBLE_DEVICES. Jobs: every task a ``worker`` (sync), or a
``chief``, ``n_ps`` ``ps`` and the rest ``worker`` (ps; the resolver fills jobs in
alphabetical order, so rank 0 is the chief).

On a node without GPUs the resolver would ask nvidia-smi and fail; it is then told one
(unused) GPU per task and not to set CUDA_VISIBLE_DEVICES. Returns ``{"tf_config": ...,
"cuda_visible_devices": ... | None}``; the parent checks the TF_CONFIG like any other.
"""

from __future__ import annotations

import os
from typing import Any


def run(config: dict[str, Any]) -> dict[str, Any]:
    import tensorflow as tf
    from tensorflow.python.distribute.cluster_resolver import slurm_cluster_resolver as slurm

    ntasks = int(os.environ["SLURM_STEP_NUM_TASKS"])
    if config.get("mode") == "ps":
        n_ps = int(config.get("n_ps", 1))
        if ntasks < n_ps + 2:
            raise ValueError(f"--mode ps needs at least {n_ps + 2} Slurm tasks (a chief, "
                             f"{n_ps} ps, a worker); the step has {ntasks}")
        jobs = {"chief": 1, "ps": n_ps, "worker": ntasks - 1 - n_ps}
    else:
        jobs = {"worker": ntasks}
    gpus = len(tf.config.list_physical_devices("GPU"))
    kwargs: dict[str, Any] = {}
    if not gpus:
        per_node = max(slurm.expand_tasks_per_node(os.environ["SLURM_STEP_TASKS_PER_NODE"]))
        kwargs = {"gpus_per_node": per_node, "gpus_per_task": 1, "auto_set_gpu": False}
    resolver = tf.distribute.cluster_resolver.SlurmClusterResolver(
        jobs=jobs, port_base=int(config.get("port_base", 8888)), **kwargs)
    spec = resolver.cluster_spec().as_dict()
    return {"tf_config": {"cluster": spec,
                          "task": {"type": resolver.task_type, "index": resolver.task_id}},
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES") if gpus else None}
