"""Asynchronous training: ParameterServerStrategy with a ClusterCoordinator.

Three kinds of task, as in TensorFlow's parameter server training tutorial:

- ``ps`` and ``worker`` tasks run ``serve``: a ``tf.distribute.Server`` for their task,
  then nothing but waiting. They end when the chief has stopped answering for
  ``server_wait_s`` (it finished, died, or never came up): TensorFlow's servers have no
  clean shutdown of their own;
- the ``chief`` runs ``coordinate``: ParameterServerStrategy connects to every task;
  the model's variables (and SGD's momentum) are created under its scope, so they live
  on the parameter servers; a ClusterCoordinator schedules one training step at a time
  onto whichever worker is free. Each step reads the variables from the ps, computes
  the gradient of its batch and applies it there, with no waiting for the other workers
  (asynchronous: a worker's gradient may be computed on weights a few updates old).

Per step the worker returns its index (``experimental_get_current_worker_index``) and
the start and end of the step on its own clock (``tf.timestamp``), so every worker's
throughput is measured where it ran. Steps are scheduled in chunks of
``backup_every``; after each chunk the coordinator saves a backup of the variables (on
the ps) and a restarted coordinator resumes from it. A worker that dies is TensorFlow's
to handle: the coordinator re-runs its steps on the others and takes it back when it
returns. No profiler trace here: the coordinator's trace does not show the workers' ops.
"""

from __future__ import annotations

import shutil
import socket
import statistics
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from gpudiag import layout
from gpudiag.records.cluster import WorkerConfig, WorkerResult, WorkerStats
from gpudiag.records.tfconfig import TfConfig, split_address
from gpudiag.records.training import finite
from gpudiag.train import cluster_data
from gpudiag.train.loop import FINAL_WINDOW, evaluate
from gpudiag.train.model import ProbeModel, correct_count, model_spec, per_example_loss
from gpudiag.train.multiworker import say, write_worker_scalars

POLL_S = 1.0


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=POLL_S):
            return True
    except OSError:
        return False


def serve(cfg: WorkerConfig, tfc: TfConfig) -> WorkerResult:
    """A ps or worker task: start its server, serve until the chief is gone."""
    start = time.perf_counter()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=tfc.task_type,
                                  task_index=tfc.task_index,
                                  protocol=resolver.rpc_layer or "grpc", start=True)
    if cfg.progress:
        say(layout.cluster_line(layout.CLUSTER_FORMED, tfc.task))
    host, port = split_address(tfc.cluster["chief"][0], "cluster.chief[0]")
    seen = False
    last_answer = time.monotonic()
    while True:
        if _answers(host, port):
            seen, last_answer = True, time.monotonic()
        elif time.monotonic() - last_answer > cfg.server_wait_s:
            break
        time.sleep(POLL_S)
    del server  # no clean shutdown: the process ends here
    note = ("the chief stopped answering" if seen
            else f"the chief never answered within {cfg.server_wait_s:g} s")
    return WorkerResult(
        mode="ps", role="server", task=tfc.task, is_chief=False,
        cluster={k: list(v) for k, v in tfc.cluster.items()},
        num_workers=len(tfc.cluster.get("worker", ())), devices=[], device_kind="cpu",
        global_batch=cfg.workload.batch_per_device, resumed_from=0, own=None, workers=[],
        losses=[], final_loss=None, final_accuracy=None, eval_loss=None, eval_accuracy=None,
        served_s=time.perf_counter() - start, wall_s=time.perf_counter() - start,
        notes=[note])


class _Momentum(tf.Module):
    """SGD with momentum as Keras writes it (v = m v - lr g; w += v), on the ps."""

    def __init__(self, params: list[tf.Variable]) -> None:
        super().__init__(name="momentum")
        self.velocity = [tf.Variable(tf.zeros_like(p), trainable=False,
                                     name=f"velocity_{i}") for i, p in enumerate(params)]


def per_worker_stats(rows: list[tuple[int, float, float]], n_workers: int, batch: int,
                     warmup: int, first: int) -> list[WorkerStats]:
    """Each worker's measurements from (worker index, start s, end s) in step order.

    The first ``warmup`` steps and each worker's first step (its function is built on
    it) are left out; a worker's rate is its timed steps' examples over the span from
    the first one's start to the last one's end, on its own clock."""
    by_worker: dict[int, list[tuple[int, float, float]]] = defaultdict(list)
    for k, (index, t0, t1) in enumerate(rows):
        by_worker[index].append((k, t0, t1))
    out = []
    for index in range(n_workers):
        mine = by_worker.get(index, [])
        timed = [(t0, t1) for k, t0, t1 in mine[1:] if k >= warmup]
        span = (max(t1 for _, t1 in timed) - min(t0 for t0, _ in timed)) if timed else 0.0
        out.append(WorkerStats(
            task=layout.task_name("worker", index), steps=len(mine), first_step=first,
            last_step=first + max((k + 1 for k, _, _ in mine), default=0), batch=batch,
            timed_steps=len(timed),
            examples_per_s=len(timed) * batch / span if span > 0 else None,
            step_s_median=statistics.median(t1 - t0 for t0, t1 in timed) if timed else None))
    return out


def coordinate(cfg: WorkerConfig, tfc: TfConfig) -> WorkerResult:
    """The chief of a ps-mode run: the training loop; see the module docstring."""
    start = time.perf_counter()
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.coordinator.ClusterCoordinator(strategy)
    if cfg.progress:
        say(layout.cluster_line(layout.CLUSTER_FORMED, tfc.task))
    w = cfg.workload
    n_workers = len(tfc.cluster["worker"])
    # after connecting, the cluster's devices are listed here too (/job:worker/...)
    worker_gpus = [d.name for d in tf.config.list_logical_devices("GPU")
                   if "/job:worker/" in d.name]
    batch = w.batch_per_device
    state = _PsState.build(strategy, cfg)
    manager, first = _restore_backup(cfg, state)
    iterator = _per_worker_iterator(strategy, coordinator, n_workers, batch, first)
    train_step = _make_train_step(strategy, state, w.learning_rate, w.momentum)
    logdir = Path(cfg.logdir)
    logdir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        steps = _schedule_steps(cfg, coordinator, train_step, iterator, manager, first)
        workers = per_worker_stats(steps.rows, n_workers, batch, w.warmup_steps, first)
        ex, ey = cluster_data.eval_arrays(cfg.n_eval)
        params = [tf.convert_to_tensor(v) for v in state.model.params]
        eval_loss, eval_acc = evaluate(state.model.forward, params, ex, ey, 512)
        tf.summary.scalar(layout.TAG_EVAL_LOSS, eval_loss, step=w.steps)
        tf.summary.scalar(layout.TAG_EVAL_ACCURACY, eval_acc, step=w.steps)
        write_worker_scalars(workers, w.steps)
    writer.close()
    if cfg.backup_dir:
        shutil.rmtree(cfg.backup_dir, ignore_errors=True)
    timed = steps.fetched_at[w.warmup_steps:]
    coord_rate = ((len(timed) - 1) * batch / (timed[-1] - timed[0])
                  if len(timed) > 1 and timed[-1] > timed[0] else None)
    losses, accuracies = steps.losses, steps.accuracies
    tail = slice(-min(FINAL_WINDOW, len(losses)), None) if losses else slice(0, 0)
    return WorkerResult(
        mode="ps", role="coordinator", task=tfc.task, is_chief=True,
        cluster={k: list(v) for k, v in tfc.cluster.items()}, num_workers=n_workers,
        devices=worker_gpus, device_kind="gpu" if worker_gpus else "cpu", global_batch=batch,
        resumed_from=first, own=None,
        workers=workers, losses=[finite(v) for v in losses],
        final_loss=finite(float(np.mean(losses[tail]))) if losses else None,
        final_accuracy=finite(float(np.mean(accuracies[tail]))) if accuracies else None,
        eval_loss=finite(eval_loss), eval_accuracy=finite(eval_acc),
        coordinator_examples_per_s=coord_rate, backups_saved=steps.backups,
        lost_outputs=steps.lost_outputs, wall_s=time.perf_counter() - start)


@dataclass(frozen=True)
class _PsState:
    """The variables on the parameter servers: model, momentum, step counter."""

    model: ProbeModel
    momentum: _Momentum
    step: tf.Variable
    checkpoint: tf.train.Checkpoint

    @classmethod
    def build(cls, strategy: tf.distribute.Strategy, cfg: WorkerConfig) -> _PsState:
        w = cfg.workload
        info = cluster_data.info(cfg.n_eval)
        with strategy.scope():
            model = ProbeModel(model_spec(w.model), info.input_shape, info.num_classes,
                               seed=w.seed)
            momentum = _Momentum(model.params)
            step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
        checkpoint = tf.train.Checkpoint(model=model, momentum=momentum, step=step)
        return cls(model, momentum, step, checkpoint)


def _restore_backup(
    cfg: WorkerConfig, state: _PsState
) -> tuple[tf.train.CheckpointManager | None, int]:
    """The backup manager (None without a backup directory) and the step to start at (the
    latest backup's, restored; 0: none)."""
    if not cfg.backup_dir:
        return None, 0
    manager = tf.train.CheckpointManager(state.checkpoint, cfg.backup_dir, max_to_keep=2)
    first = 0
    if manager.latest_checkpoint:
        state.checkpoint.restore(manager.latest_checkpoint)
        first = int(state.step.numpy())
        if cfg.progress:
            say(layout.cluster_line(layout.CLUSTER_RESUMED, str(first)))
    return manager, first


def _per_worker_iterator(strategy: tf.distribute.Strategy, coordinator: Any, n_workers: int,
                         batch: int, first: int) -> Any:
    """Each worker's own slice of the stream, from example ``first * batch`` on."""

    def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        return cluster_data.stream(index, n_workers, batch, first * batch)

    return iter(coordinator.create_per_worker_dataset(
        tf.function(lambda: strategy.distribute_datasets_from_function(dataset_fn))))


def _make_train_step(strategy: tf.distribute.Strategy, state: _PsState,
                     learning_rate: float, momentum: float) -> Any:
    """The step a worker runs: its batch's gradient applied on the ps with momentum; returns
    loss, correct count, the worker's index and the step's start and end on its clock."""
    model, velocity, step = state.model, state.momentum.velocity, state.step
    lr, mom = float(learning_rate), float(momentum)

    def replica_step(x: tf.Tensor, y: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        with tf.GradientTape() as tape:
            logits = model(x)
            loss = tf.reduce_mean(per_example_loss(logits, y))
        grads = tape.gradient(loss, model.params)
        for var, vel, grad in zip(model.params, velocity, grads, strict=True):
            vel.assign(mom * vel - lr * grad)
            var.assign_add(vel)
        step.assign_add(1)
        return loss, correct_count(logits, y)

    @tf.function
    def train_step(it: Any) -> tuple[tf.Tensor, ...]:
        t0 = tf.timestamp()
        with tf.control_dependencies([t0]):
            x, y = next(it)
        loss, correct = strategy.run(replica_step, args=(x, y))
        loss = strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
        correct = strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None)
        with tf.control_dependencies([loss, correct]):
            t1 = tf.timestamp()
        index = tf.distribute.coordinator.experimental_get_current_worker_index()
        return loss, correct, index, t0, t1

    return train_step


@dataclass
class _PsSteps:
    """What the coordinator fetched of the scheduled steps."""

    rows: list[tuple[int, float, float]] = field(default_factory=list)  # worker, t0, t1
    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    fetched_at: list[float] = field(default_factory=list)  # perf_counter s per fetch
    backups: int = 0
    lost_outputs: int = 0


def _schedule_steps(cfg: WorkerConfig, coordinator: Any, train_step: Any, iterator: Any,
                    manager: tf.train.CheckpointManager | None, first: int) -> _PsSteps:
    """Steps ``first`` .. the last, scheduled in chunks of ``backup_every`` with a backup
    after each chunk but the last (under the summary writer)."""
    w = cfg.workload
    out = _PsSteps()
    done = first
    while done < w.steps:
        chunk = min(cfg.backup_every, w.steps - done)
        remote = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(chunk)]
        for value in remote:
            try:
                loss, correct, index, t0, t1 = value.fetch()
            except tf.errors.UnavailableError:
                # The step ran (its update is on the parameter servers), but the worker
                # holding its outputs died before the coordinator copied them: the
                # step counts, its loss and timing are lost with the worker.
                done += 1
                out.lost_outputs += 1
                continue
            done += 1
            out.rows.append((int(index), float(t0), float(t1)))
            out.losses.append(float(loss))
            out.accuracies.append(float(correct) / w.batch_per_device)
            out.fetched_at.append(time.perf_counter())
            tf.summary.scalar(layout.TAG_TRAIN_LOSS, float(loss), step=done)
            if cfg.progress:
                say(layout.step_line(done, w.steps, float(loss)))
        coordinator.join()
        if manager is not None and done < w.steps:
            manager.save(checkpoint_number=done)
            out.backups += 1
    return out
