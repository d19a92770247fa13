"""The probe trained the way most users write it: ``compile`` / ``fit`` under MirroredStrategy.

The Keras model (model.build_keras_model: same layers, same initial weights as the
towers') is built inside ``MirroredStrategy(devices).scope()``, compiled with SGD and
momentum and ``use_ema=True`` (Keras's moving average of the weights, its equivalent of
tf.train.ExponentialMovingAverage, but with a fixed decay: no ``num_updates`` warm-up,
so on a short run the average lags further behind the weights than the towers'), and
fit on the same tf.data stream. Keras's own ``TensorBoard`` callback writes the
per-batch scalars (``train/batch_loss`` ..., Keras's running epoch means), weight
histograms and the profiler trace (``profile_batch``); a small callback times each
batch (the fetch of the batch's loss waits for the batch to finish) and writes
``train/examples_per_s`` and ``train/step_s`` like the other strategies.

Histograms every K steps: ``fit`` runs epochs of K steps (``steps_per_epoch=K``) with
``histogram_freq=1``; Keras logs weights only, not gradients. Each replica's forward
pass runs under ``tf.name_scope("tower_<i>")`` (a wrapper model), so a trace is
attributed to devices as for the other strategies.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import keras
import numpy as np
import tensorflow as tf

from gpudiag import layout
from gpudiag.records.training import TrainResult, finite
from gpudiag.train.loop import Evaluation, LoopConfig, throughput
from gpudiag.train.model import ModelTask, build_keras_model
from gpudiag.train.summaries import Instrumentation
from gpudiag.train.towers import TrainerOptions, op_devices


class _TowerScoped(keras.Model):
    """Runs the inner model under ``tower_<replica id>`` so traces name the replica."""

    def __init__(self, inner: keras.Model) -> None:
        super().__init__(name="probe")
        self.inner = inner

    def call(self, x: Any, training: bool = False) -> Any:
        ctx = tf.distribute.get_replica_context()
        replica = tf.get_static_value(ctx.replica_id_in_sync_group) if ctx else 0
        with tf.name_scope(layout.tower_scope(int(replica or 0))):
            return self.inner(x, training=training)


class _StepTimer(keras.callbacks.Callback):
    def __init__(self, global_batch: int, writer: Any, scalars: bool, steps: int,
                 on_step: Any = None) -> None:
        super().__init__()
        self.on_step = on_step
        self.global_batch = global_batch
        self.steps = steps
        self.raw_weights: list[np.ndarray] | None = None
        self.writer = writer
        self.scalars = scalars
        self.step_s: list[float] = []
        self.losses: list[float] = []
        self.accuracies: list[float] = []
        self._t0 = 0.0

    def on_train_batch_begin(self, batch: int, logs: Any = None) -> None:
        self._t0 = time.perf_counter()

    def on_train_batch_end(self, batch: int, logs: Any = None) -> None:
        logs = logs or {}
        loss = float(logs.get("loss", np.nan))  # waits for the batch to finish
        dt = time.perf_counter() - self._t0
        self.step_s.append(dt)
        self.losses.append(loss)
        self.accuracies.append(float(logs.get("accuracy", np.nan)))
        if self.scalars:
            step = len(self.step_s)
            with self.writer.as_default():
                tf.summary.scalar(layout.TAG_TRAIN_EXAMPLES_PER_S, self.global_batch / dt,
                                  step=step)
                tf.summary.scalar(layout.TAG_TRAIN_STEP_S, dt, step=step)
        if self.on_step is not None:
            self.on_step(len(self.step_s) - 1, loss, dt)
        if len(self.step_s) >= self.steps:
            self.model.stop_training = True

    def on_epoch_end(self, epoch: int, logs: Any = None) -> None:
        # fit() ends by overwriting the weights with their moving averages; keep the raw
        # ones of the last epoch for the evaluation beside them.
        self.raw_weights = [np.array(w) for w in self.model.get_weights()]


def train_keras(
    task: ModelTask,
    devices: list[str],
    dataset: tf.data.Dataset,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    loop: LoopConfig,
    options: TrainerOptions,
    *,
    on_step: Any = None,
) -> TrainResult:
    start = time.perf_counter()
    instr = options.instr
    global_batch = options.batch_per_device * len(devices)
    model, optimizer = _compiled_model(task, devices, options)
    use_ema = instr.ema_decay is not None
    loop.logdir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(loop.logdir))
    timer = _StepTimer(global_batch, writer, instr.scalars, loop.steps, on_step)
    steps_per_epoch = instr.histogram_every or loop.steps
    epochs = -(-loop.steps // steps_per_epoch)  # the timer stops fit after loop.steps
    model.fit(dataset, epochs=epochs, steps_per_epoch=steps_per_epoch,
              callbacks=[timer, _tensorboard_callback(loop, instr)], verbose=0, shuffle=False)
    steps_run = len(timer.step_s)
    evals = _evaluate(model, timer, (eval_x, eval_y), loop.eval_batch, use_ema)
    with writer.as_default():
        tf.summary.scalar(layout.TAG_EVAL_LOSS, evals.loss, step=steps_run)
        tf.summary.scalar(layout.TAG_EVAL_ACCURACY, evals.accuracy, step=steps_run)
        if use_ema:
            tf.summary.scalar(layout.TAG_EVAL_LOSS_EMA, evals.loss_ema, step=steps_run)
            tf.summary.scalar(layout.TAG_EVAL_ACCURACY_EMA, evals.accuracy_ema, step=steps_run)
    writer.close()
    checkpoint_path = None
    if loop.checkpoint:
        manager = tf.train.CheckpointManager(
            tf.train.Checkpoint(model=model, optimizer=optimizer),
            str(loop.logdir / layout.CHECKPOINT_DIR), max_to_keep=1,
        )
        checkpoint_path = manager.save(checkpoint_number=steps_run)
    profiled = ([i for i in range(loop.warmup_steps, loop.warmup_steps + loop.profile_steps)
                 if i < steps_run] if loop.profile_steps else [])
    timed = [i for i in range(steps_run) if loop.is_timed(i)]
    tail = slice(-min(10, steps_run), None)
    return TrainResult(
        strategy="keras",
        devices=list(devices),
        global_batch=global_batch,
        steps=steps_run,
        step_s=timer.step_s,
        timed_steps=timed,
        examples_per_s=throughput(timer.step_s, timed, global_batch),
        step_s_median=float(np.median([timer.step_s[i] for i in timed])) if timed else None,
        losses=[finite(v) for v in timer.losses],
        accuracies=[finite(v) for v in timer.accuracies],
        tower_losses_last=[],
        final_loss=finite(float(np.mean(timer.losses[tail]))),
        final_accuracy=finite(float(np.mean(timer.accuracies[tail]))),
        eval_loss=finite(evals.loss),
        eval_accuracy=finite(evals.accuracy),
        eval_loss_ema=finite(evals.loss_ema),
        eval_accuracy_ema=finite(evals.accuracy_ema),
        ops_by_device={},
        op_devices=_train_function_devices(model),
        profile_dir=str(Path(loop.logdir) / layout.KERAS_TRAIN_RUN) if loop.profile_steps else None,
        profiled_steps=profiled,
        checkpoint_path=checkpoint_path,
        wall_s=time.perf_counter() - start,
    )


def _compiled_model(
    task: ModelTask, devices: list[str], options: TrainerOptions
) -> tuple[keras.Model, keras.optimizers.SGD]:
    """The tower-scoped Keras model compiled under MirroredStrategy(devices), with SGD and
    momentum (and Keras's moving average when the instrumentation has one)."""
    instr = options.instr
    strategy = tf.distribute.MirroredStrategy(devices)
    with strategy.scope():
        model = _TowerScoped(build_keras_model(task.spec, task.input_shape, task.num_classes,
                                               options.seed))
        optimizer = keras.optimizers.SGD(
            learning_rate=options.learning_rate, momentum=options.momentum,
            use_ema=instr.ema_decay is not None,
            ema_momentum=instr.ema_decay or 0.99, ema_overwrite_frequency=None,
        )
        model.compile(
            optimizer=optimizer,
            loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            metrics=["accuracy"],
        )
    return model, optimizer


def _tensorboard_callback(loop: LoopConfig, instr: Instrumentation) -> keras.callbacks.TensorBoard:
    """Keras's TensorBoard callback: per-batch scalars, histograms, the profiler window."""
    profile_batch: Any = 0
    if loop.profile_steps:
        # Keras counts batches from 1 across epochs.
        profile_batch = (loop.warmup_steps + 1, loop.warmup_steps + loop.profile_steps)
    return keras.callbacks.TensorBoard(
        log_dir=str(loop.logdir),
        histogram_freq=1 if instr.histogram_every else 0,
        update_freq=1 if instr.scalars else "epoch",
        profile_batch=profile_batch,
        write_graph=False,
    )


def _evaluate(model: keras.Model, timer: _StepTimer, held_out: tuple[np.ndarray, np.ndarray],
              batch: int, use_ema: bool) -> Evaluation:
    """Evaluate the moving averages fit() left in the weights (with use_ema), then the raw
    weights of the last epoch, put back."""
    eval_x, eval_y = held_out
    eval_loss_ema = eval_acc_ema = None
    if use_ema:  # fit() left the moving averages in the weights
        eval_loss_ema, eval_acc_ema = model.evaluate(eval_x, eval_y, batch_size=batch,
                                                     verbose=0)
        if timer.raw_weights is not None:
            model.set_weights(timer.raw_weights)
    eval_loss, eval_acc = model.evaluate(eval_x, eval_y, batch_size=batch, verbose=0)
    return Evaluation(eval_loss, eval_acc, eval_loss_ema, eval_acc_ema)


def _train_function_devices(model: Any) -> dict[str, str]:
    """Node -> assigned device in Keras's traced train step: the tf.functions inside
    ``model.train_function`` (Keras 3 keeps them in its closure: the per-replica step and
    the loop over it), where MirroredStrategy pinned each replica's ops to its device."""
    devices: dict[str, str] = {}
    for fn in _tf_functions(getattr(model, "train_function", None)):
        for cf in fn._list_all_concrete_functions():
            devices.update(op_devices(cf.graph))
    return devices


def _tf_functions(fn: Any, depth: int = 4) -> list[Any]:
    """The tf.functions reachable from ``fn`` through closures (Keras wraps them)."""
    if fn is None or depth < 0:
        return []
    if hasattr(fn, "_list_all_concrete_functions"):
        return [fn]
    found: list[Any] = []
    for cell in getattr(fn, "__closure__", None) or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if callable(value):
            found += [f for f in _tf_functions(value, depth - 1) if f not in found]
    return found
