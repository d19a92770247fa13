"""Synchronous multi-worker training: MultiWorkerMirroredStrategy with a custom loop.

Each task of the cluster (every ``chief`` and ``worker`` in TF_CONFIG) runs this, the
way TensorFlow's "multi-worker training with a custom training loop" tutorial does:

1. the strategy is created first, before any other TensorFlow call (collectives must be
   configured at start-up), with ``CommunicationOptions(timeout_seconds=...)`` so that a
   collective waiting for a peer that stopped fails instead of hanging; creating it
   blocks until every task has connected (TensorFlow's coordination service);
2. the probe model is the MirroredStrategy trainer's (gpudiag/train/mirrored.py): one
   replica per local device, gradients summed by an all-reduce across every replica of
   every worker, one update; the input comes from ``distribute_datasets_from_function``,
   one pipeline per worker (gpudiag/train/cluster_data.py);
3. backups: every ``backup_every`` steps each worker saves model, optimizer, moving
   averages and step counter into its own backup directory (tf.train.CheckpointManager,
   the two latest kept). A restarted cluster agrees on the newest step every worker has
   (an all-gather of each one's latest backup, then the minimum) and resumes there, the
   data stream included: what tf.keras.callbacks.BackupAndRestore does for Model.fit.
   The backups are removed when the run completes;
4. each worker times its own steps (warm-up and profiled steps left out), and all workers
   exchange these numbers with one all-gather at the end, so the chief can report every
   worker's. Only the coordination leader (the chief, else worker 0) runs the profiler
   over the profiled steps and reads the time in collective ops from its trace: TensorFlow
   2.21's profiler aborted a worker that was not the leader (``free(): invalid pointer``)
   as it stopped, in 4 of 64 two-worker runs with both traced, 0 of 80 with the leader
   alone.

No Model.fit here: Keras 3's Model.fit fails under this strategy (gpudiag/cluster/
messages.py, ``keras3-fit-perreplica``).
"""

from __future__ import annotations

import math
import shutil
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import tensorflow as tf

from gpudiag import layout
from gpudiag.readers import traces
from gpudiag.records.cluster import WorkerConfig, WorkerResult, WorkerStats
from gpudiag.records.tfconfig import TfConfig
from gpudiag.records.training import finite
from gpudiag.train import cluster_data
from gpudiag.train.loop import FINAL_WINDOW, evaluate, run_one_step, step_scalars, throughput
from gpudiag.train.mirrored import MirroredTrainer
from gpudiag.train.model import ModelTask, model_spec
from gpudiag.train.summaries import Instrumentation
from gpudiag.train.towers import TrainerOptions, build_state

STAT_FIELDS = ("examples_per_s", "step_s_median", "steps", "first_step", "last_step", "batch",
               "timed_steps", "communication_s_per_step")


def say(line: str) -> None:
    print(line, flush=True)


def create_strategy(collective_timeout_s: float) -> tf.distribute.Strategy:
    """MultiWorkerMirroredStrategy from TF_CONFIG; blocks until the cluster has formed."""
    options = tf.distribute.experimental.CommunicationOptions(
        timeout_seconds=collective_timeout_s)
    return tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)


class MultiWorkerTrainer(MirroredTrainer):
    """The mirrored trainer's step over every replica of the cluster."""

    strategy_name = "multiworker"

    def __init__(self, strategy: tf.distribute.Strategy, task: ModelTask,
                 options: TrainerOptions) -> None:
        """``options.batch_per_device``: the batch of each replica."""
        # MirroredTrainer.__init__ would build a local MirroredStrategy: set up the same
        # attributes over the multi-worker strategy instead.
        self.strategy = strategy
        self.devices = list(strategy.extended.worker_devices)
        self.batch_per_device = options.batch_per_device
        self.global_batch = options.batch_per_device * strategy.num_replicas_in_sync
        self.instr = options.instr
        self.variables_device = self.devices[0]
        with strategy.scope():
            self.model, self.step, self.optimizer, self.ema = build_state(task, options)
        self._step_fn = tf.function(self._step)
        self._graph: tf.Graph | None = None

    def cluster_iterator(self, start_example: int) -> Any:
        def dataset_fn(ctx: tf.distribute.InputContext) -> tf.data.Dataset:
            return cluster_data.stream(ctx.input_pipeline_id, ctx.num_input_pipelines,
                                       ctx.get_per_replica_batch_size(self.global_batch),
                                       start_example)

        return iter(self.strategy.distribute_datasets_from_function(dataset_fn))


def all_gather_rows(strategy: tf.distribute.Strategy, row: list[float]) -> np.ndarray:
    """Every replica's ``row`` (float64), in replica order: [replicas, len(row)]."""

    def replica_fn(value: tf.Tensor) -> tf.Tensor:
        return tf.distribute.get_replica_context().all_gather(tf.identity(value), axis=0)

    @tf.function
    def gather(value: tf.Tensor) -> Any:
        return strategy.run(replica_fn, args=(value,))

    local = strategy.experimental_local_results(gather(tf.constant([row], tf.float64)))
    return np.asarray(local[0])


def agree_on_backup(strategy: tf.distribute.Strategy, manager: tf.train.CheckpointManager,
                    ) -> int:
    """The newest backup step every worker has (0: none), agreed through an all-gather."""
    mine = [int(p.rsplit("-", 1)[1]) for p in manager.checkpoints]
    rows = all_gather_rows(strategy, [float(max(mine, default=0))])
    agreed = int(rows[:, 0].min())
    if agreed and agreed not in mine:
        raise RuntimeError(f"the workers' backups disagree: they share step {agreed}, "
                           f"this worker has {mine}")
    return agreed


def _comm_per_step(logdir: Path, profiled: int) -> float | None:
    files = traces.find_xplanes(logdir)
    if not files or not profiled:
        return None
    try:
        summary = traces.summarize(files[-1])
    except traces.TraceError:
        return None
    return summary.communication_s / profiled


def _stats(task: str, step_s: list[float], timed: list[int], first: int, batch: int,
           comm: float | None) -> WorkerStats:
    return WorkerStats(
        task=task, steps=len(step_s), first_step=first, last_step=first + len(step_s),
        batch=batch, timed_steps=len(timed), examples_per_s=throughput(step_s, timed, batch),
        step_s_median=statistics.median([step_s[i] for i in timed]) if timed else None,
        communication_s_per_step=comm)


def _gathered(strategy: tf.distribute.Strategy, tfc: TfConfig, own: WorkerStats,
              replicas_per_worker: int) -> list[WorkerStats]:
    row = [math.nan if getattr(own, f) is None else float(getattr(own, f)) for f in STAT_FIELDS]
    rows = all_gather_rows(strategy, row)
    out = []
    for i, (job, index) in enumerate(tfc.training_tasks):
        values = dict(zip(STAT_FIELDS, rows[i * replicas_per_worker], strict=True))
        out.append(WorkerStats(
            task=layout.task_name(job, index), steps=int(values["steps"]),
            first_step=int(values["first_step"]), last_step=int(values["last_step"]),
            batch=int(values["batch"]), timed_steps=int(values["timed_steps"]),
            examples_per_s=finite(values["examples_per_s"]),
            step_s_median=finite(values["step_s_median"]),
            communication_s_per_step=finite(values["communication_s_per_step"])))
    return out


def train_sync(cfg: WorkerConfig, tfc: TfConfig) -> WorkerResult:
    """This task's part of a synchronous run; see the module docstring."""
    start = time.perf_counter()
    strategy = create_strategy(cfg.collective_timeout_s)  # first TensorFlow call
    if cfg.progress:
        say(layout.cluster_line(layout.CLUSTER_FORMED, tfc.task))
    trainer = _make_trainer(cfg, strategy)
    manager, first = _restore_backup(cfg, strategy, trainer)
    run = _SyncRun(cfg, tfc, trainer, manager, first, Path(cfg.logdir))
    run.logdir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(run.logdir))
    with writer.as_default():
        steps = _train_steps(run)
    w = cfg.workload
    replicas = len(trainer.devices)
    timed = [k for k in range(len(steps.step_s)) if k >= w.warmup_steps + w.profile_steps]
    own = _stats(tfc.task, steps.step_s, timed, first, w.batch_per_device * replicas,
                 _comm_per_step(run.logdir, steps.profiled))
    workers = _gathered(strategy, tfc, own, replicas)
    is_chief = bool(strategy.extended.should_checkpoint)
    eval_loss = eval_acc = None
    with writer.as_default():
        if is_chief:
            eval_loss, eval_acc = _chief_evaluation(cfg, trainer, workers)
    writer.close()
    if cfg.backup_dir:
        shutil.rmtree(cfg.backup_dir, ignore_errors=True)  # complete: nothing to resume
    losses, accuracies = steps.losses, steps.accuracies
    tail = slice(-min(FINAL_WINDOW, len(losses)), None) if losses else slice(0, 0)
    return WorkerResult(
        mode="sync", role="trainer", task=tfc.task, is_chief=is_chief,
        cluster={k: list(v) for k, v in tfc.cluster.items()},
        num_workers=len(tfc.training_tasks), devices=list(trainer.devices),
        device_kind="gpu" if any("GPU" in d for d in trainer.devices) else "cpu",
        global_batch=trainer.global_batch, resumed_from=first, own=own, workers=workers,
        losses=[finite(v) for v in losses],
        final_loss=finite(float(np.mean(losses[tail]))) if losses else None,
        final_accuracy=finite(float(np.mean(accuracies[tail]))) if accuracies else None,
        eval_loss=finite(eval_loss), eval_accuracy=finite(eval_acc),
        profile_dir=str(run.logdir) if steps.profiled else None,
        backups_saved=steps.backups, wall_s=time.perf_counter() - start)


def _make_trainer(cfg: WorkerConfig, strategy: tf.distribute.Strategy) -> MultiWorkerTrainer:
    """The workload's model and optimizer under the multi-worker strategy."""
    w = cfg.workload
    info = cluster_data.info(cfg.n_eval)
    instr = Instrumentation(scalars=True, histogram_every=w.histogram_every,
                            ema_decay=w.ema_decay or None)
    task = ModelTask(model_spec(w.model), info.input_shape, info.num_classes)
    return MultiWorkerTrainer(strategy, task, TrainerOptions(
        batch_per_device=w.batch_per_device, learning_rate=w.learning_rate,
        momentum=w.momentum, instrumentation=instr, seed=w.seed))


def _restore_backup(
    cfg: WorkerConfig, strategy: tf.distribute.Strategy, trainer: MultiWorkerTrainer
) -> tuple[tf.train.CheckpointManager | None, int]:
    """The backup manager (None without a backup directory) and the step to start at: the
    newest backup every worker has, restored (0: none)."""
    if not cfg.backup_dir:
        return None, 0
    manager = tf.train.CheckpointManager(trainer.checkpoint(), cfg.backup_dir, max_to_keep=2)
    first = agree_on_backup(strategy, manager)
    if first:
        trainer.checkpoint().restore(f"{Path(cfg.backup_dir) / 'ckpt'}-{first}")
        if cfg.progress:
            say(layout.cluster_line(layout.CLUSTER_RESUMED, str(first)))
    return manager, first


@dataclass(frozen=True)
class _SyncRun:
    """What this task's training steps run with."""

    cfg: WorkerConfig
    tfc: TfConfig
    trainer: MultiWorkerTrainer
    manager: tf.train.CheckpointManager | None  # None: no backups
    first: int  # the step resumed from (0: a fresh start)
    logdir: Path


@dataclass
class _Steps:
    """What the steps of this task measured."""

    step_s: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    backups: int = 0
    profiled: int = 0  # steps traced by the profiler


def _train_steps(run: _SyncRun) -> _Steps:
    """Steps ``run.first`` .. the workload's last, under the summary writer: the profiler
    window on the coordination leader, progress lines, the backups."""
    cfg, w, trainer = run.cfg, run.cfg.workload, run.trainer
    iterator = trainer.cluster_iterator(run.first * trainer.global_batch)
    out = _Steps()
    traces_here = run.tfc.task == run.tfc.coordination_leader
    scalars = step_scalars(trainer)
    for k, index in enumerate(range(run.first, w.steps)):
        tracing = traces_here and w.warmup_steps <= k < w.warmup_steps + w.profile_steps
        if tracing and k == w.warmup_steps:
            tf.profiler.experimental.start(str(run.logdir))
        outcome = run_one_step(trainer, iterator, index, scalars=scalars, traced=tracing)
        if tracing:
            out.profiled += 1
            if out.profiled == w.profile_steps:
                tf.profiler.experimental.stop()
        out.step_s.append(outcome.step_s)
        out.losses.append(outcome.loss)
        out.accuracies.append(outcome.accuracy)
        if cfg.progress:
            say(layout.step_line(index + 1, w.steps, outcome.loss))
        if run.manager is not None and (index + 1) % cfg.backup_every == 0 \
                and index + 1 < w.steps:
            run.manager.save(checkpoint_number=index + 1)
            out.backups += 1
    if scalars is not None:
        scalars.flush()
    if 0 < out.profiled < w.profile_steps:
        tf.profiler.experimental.stop()
    return out


def _chief_evaluation(
    cfg: WorkerConfig, trainer: MultiWorkerTrainer, workers: list[WorkerStats]
) -> tuple[float, float]:
    """The chief's held-out loss and accuracy and its combined scalars (under a writer)."""
    steps = cfg.workload.steps
    params = trainer.raw_params()
    ex, ey = cluster_data.eval_arrays(cfg.n_eval)
    eval_loss, eval_acc = evaluate(trainer.model.forward, params, ex, ey, 512)
    tf.summary.scalar(layout.TAG_EVAL_LOSS, eval_loss, step=steps)
    tf.summary.scalar(layout.TAG_EVAL_ACCURACY, eval_acc, step=steps)
    write_worker_scalars(workers, steps)
    return eval_loss, eval_acc


def write_worker_scalars(workers: list[WorkerStats], step: int) -> None:
    """The chief's combined view: each worker's examples/s and their sum (under a writer)."""
    for i, stats in enumerate(workers):
        if stats.examples_per_s is not None:
            tf.summary.scalar(layout.worker_examples_per_s_tag(i), stats.examples_per_s,
                              step=step)
    rates = [s.examples_per_s for s in workers]
    if rates and all(r is not None for r in rates):
        tf.summary.scalar(layout.TAG_CLUSTER_TOTAL_EXAMPLES_PER_S,
                          sum(r for r in rates if r is not None), step=step)
