"""Cluster probe: one task of a multi-worker cluster, in its own child process.

The task's TF_CONFIG is in the environment (the parent checked it with
gpudiag.records.tfconfig); its config is a gpudiag.records.cluster.WorkerConfig. By mode
and task type:

- ``sync``, every chief and worker task: MultiWorkerMirroredStrategy training
  (gpudiag/train/multiworker.py);
- ``ps``, the chief: the ClusterCoordinator's training loop, variables on the
  parameter servers (gpudiag/train/parameter_server.py, ``coordinate``);
- ``ps``, ps and worker tasks: a TensorFlow server that runs what the coordinator
  sends, until the chief is gone (``serve``).

TensorFlow's Python log is raised to INFO, so the task's stderr keeps what TensorFlow
says about the cluster (the strategy's cluster spec, a single-worker strategy, a
coordinator's lost and recovered workers) for gpudiag.cluster.messages. Returns a
WorkerResult.
"""

from __future__ import annotations

import os
from typing import Any

from gpudiag.records import tfconfig
from gpudiag.records.cluster import WorkerConfig, WorkerResult, role_of


def run_task(cfg: WorkerConfig) -> WorkerResult:
    tfc = tfconfig.parse(os.environ.get(tfconfig.ENV_VAR), mode=cfg.mode)
    import tensorflow as tf  # no op runs: the strategy must come first

    tf.get_logger().setLevel("INFO")
    role = role_of(cfg.mode, tfc.task_type)
    if role == "trainer":
        from gpudiag.train.multiworker import train_sync

        return train_sync(cfg, tfc)
    from gpudiag.train import parameter_server

    if role == "coordinator":
        return parameter_server.coordinate(cfg, tfc)
    return parameter_server.serve(cfg, tfc)


def run(config: dict[str, Any]) -> dict[str, Any]:
    """gpudiag.procs.child's entry point: config.json in, result.json's ``result`` out."""
    return run_task(WorkerConfig.from_dict(config)).to_dict()
