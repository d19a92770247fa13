"""The training loop shared by the towers and mirrored trainers.

Step by step: warm-up steps (tracing, first-touch allocations) are run and timed but
left out of the throughput; then a profiler window of at most 10 steps
(``tf.profiler.experimental.start``/``stop`` into the run directory, each step marked
with ``tf.profiler.experimental.Trace(layout.PROFILER_STEP_MARKER, step_num=...)`` so
xprof finds the
steps), also left out; then the timed steps. A step's wall time is measured around the
step call and the fetch of its loss (the fetch waits for the step to finish).

Throughput is the median over timed steps of ``global batch / step wall time``
(examples/sec), robust to the odd slow step on a shared machine.

At the end: evaluation on the held-out set with the raw weights and with the moving
averages, a checkpoint (tf.train.CheckpointManager, ``layout.CHECKPOINT_DIR``), and the
result as a gpudiag.records.training.TrainResult for the parent.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import tensorflow as tf

from gpudiag import layout
from gpudiag.records.training import MAX_PROFILE_STEPS, TrainResult, finite
from gpudiag.train import summaries
from gpudiag.train.model import correct_count, per_example_loss
from gpudiag.train.towers import op_devices, ops_by_device

FINAL_WINDOW = 10  # steps averaged for the final training loss / accuracy


class Trainer(Protocol):
    strategy_name: str
    devices: list[str]
    global_batch: int
    step: tf.Variable
    ema: Any
    optimizer: Any
    model: Any  # a ProbeModel: ``model.forward(params, x)`` is used for evaluation

    def run_step(self, iterator: Any, histograms: bool = False) -> dict[str, tf.Tensor]: ...
    def make_iterator(self, dataset: tf.data.Dataset) -> Any: ...
    def step_graph(self, iterator: Any) -> tf.Graph: ...
    def raw_params(self) -> list[Any]: ...
    def ema_params(self) -> list[Any]: ...
    def checkpoint(self) -> tf.train.Checkpoint: ...


@dataclass(frozen=True)
class LoopConfig:
    steps: int
    warmup_steps: int
    profile_steps: int  # 0: no profiler trace
    logdir: Path
    checkpoint: bool = True
    eval_batch: int = 512

    def __post_init__(self) -> None:
        if self.steps < 1:
            raise ValueError("steps must be >= 1")
        if not 0 <= self.profile_steps <= MAX_PROFILE_STEPS:
            raise ValueError(f"profile_steps must be 0..{MAX_PROFILE_STEPS}")

    def is_profiled(self, index: int) -> bool:
        return self.warmup_steps <= index < self.warmup_steps + self.profile_steps

    def is_timed(self, index: int) -> bool:
        return index >= self.warmup_steps and not self.is_profiled(index)


def throughput(step_s: list[float], timed: list[int], global_batch: int) -> float | None:
    """Median examples/sec over the timed steps."""
    rates = [global_batch / step_s[i] for i in timed if step_s[i] > 0]
    return statistics.median(rates) if rates else None


def evaluate(
    forward: Any, params: list[Any], x: np.ndarray, y: np.ndarray, batch: int
) -> tuple[float, float]:
    """Mean loss and accuracy of ``forward(params, x)`` over a held-out set."""

    @tf.function
    def batch_stats(xb: tf.Tensor, yb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        logits = forward(params, xb)
        return tf.reduce_sum(per_example_loss(logits, yb)), correct_count(logits, yb)

    loss_sum, correct = 0.0, 0.0
    for start in range(0, len(x), batch):
        loss_b, correct_b = batch_stats(
            tf.constant(x[start:start + batch]), tf.constant(y[start:start + batch])
        )
        loss_sum += float(loss_b)
        correct += float(correct_b)
    return loss_sum / len(x), correct / len(x)


def train(
    trainer: Trainer,
    dataset: tf.data.Dataset,
    eval_x: np.ndarray,
    eval_y: np.ndarray,
    loop: LoopConfig,
    *,
    on_step: Any = None,
) -> TrainResult:
    """Run ``loop.steps`` steps of ``trainer`` on ``dataset`` and log everything. (Its
    configuration reaches TensorBoard from the parent, as an HParams session.)"""
    start = time.perf_counter()
    loop.logdir.mkdir(parents=True, exist_ok=True)
    writer = tf.summary.create_file_writer(str(loop.logdir))
    iterator = trainer.make_iterator(dataset)
    with writer.as_default():
        step_graph = trainer.step_graph(iterator)
        graph_counts = ops_by_device(step_graph)
        graph_devices = op_devices(step_graph)
        marks = {"start": start, "steps": time.perf_counter()}
        steps = _run_steps(trainer, iterator, loop, on_step, marks)
        marks["eval"] = time.perf_counter()
        evals = _evaluate_and_log(trainer, eval_x, eval_y, loop)
    writer.flush()
    writer.close()
    marks["checkpoint"] = time.perf_counter()
    checkpoint_path = None
    if loop.checkpoint:
        manager = tf.train.CheckpointManager(
            trainer.checkpoint(), str(loop.logdir / layout.CHECKPOINT_DIR), max_to_keep=1
        )
        checkpoint_path = manager.save(checkpoint_number=loop.steps)
    step_s, losses, accuracies = steps.step_s, steps.losses, steps.accuracies
    timed = [i for i in range(loop.steps) if loop.is_timed(i)]
    rate = throughput(step_s, timed, trainer.global_batch)
    tail = slice(-min(FINAL_WINDOW, loop.steps), None)
    return TrainResult(
        strategy=trainer.strategy_name,
        devices=list(trainer.devices),
        global_batch=trainer.global_batch,
        steps=loop.steps,
        step_s=step_s,
        timed_steps=timed,
        examples_per_s=rate,
        step_s_median=statistics.median([step_s[i] for i in timed]) if timed else None,
        losses=[finite(v) for v in losses],
        accuracies=[finite(v) for v in accuracies],
        tower_losses_last=[finite(v) for v in steps.tower_losses],
        final_loss=finite(_mean(losses[tail])),
        final_accuracy=finite(_mean(accuracies[tail])),
        eval_loss=finite(evals.loss),
        eval_accuracy=finite(evals.accuracy),
        eval_loss_ema=finite(evals.loss_ema),
        eval_accuracy_ema=finite(evals.accuracy_ema),
        ops_by_device=graph_counts,
        op_devices=graph_devices,
        profile_dir=steps.profile_dir,
        profiled_steps=steps.profiled,
        checkpoint_path=checkpoint_path,
        wall_s=time.perf_counter() - start,
        phases=loop_phases(marks, step_s, loop),
    )


def loop_phases(marks: dict[str, float], step_s: list[float], loop: LoopConfig
                ) -> dict[str, float]:
    """Seconds per phase of ``train`` from its perf_counter marks: set-up (writer, step
    graph inspection), warm-up and timed steps (their step times), the profiler window
    (start to stop, both included), the rest of the step loop (progress lines, scalar
    writes), evaluation, checkpoint."""
    end = time.perf_counter()
    profile_s = marks.get("profile_end", marks["eval"]) - marks["profile"] \
        if "profile" in marks else 0.0
    warmup = sum(s for i, s in enumerate(step_s) if i < loop.warmup_steps)
    timed = sum(s for i, s in enumerate(step_s) if loop.is_timed(i))
    return {"setup_s": marks["steps"] - marks["start"], "warmup_s": warmup,
            "profile_s": profile_s, "timed_s": timed,
            "steps_other_s": marks["eval"] - marks["steps"] - warmup - profile_s - timed,
            "eval_s": marks["checkpoint"] - marks["eval"],
            "checkpoint_s": end - marks["checkpoint"]}


@dataclass
class _LoopSteps:
    """What the loop's steps measured."""

    step_s: list[float] = field(default_factory=list)
    losses: list[float] = field(default_factory=list)
    accuracies: list[float] = field(default_factory=list)
    tower_losses: list[float] = field(default_factory=list)  # the last step's
    profile_dir: str | None = None  # None: no profiler window ran
    profiled: list[int] = field(default_factory=list)


def _run_steps(trainer: Trainer, iterator: Any, loop: LoopConfig, on_step: Any,
               marks: dict[str, float]) -> _LoopSteps:
    """Every step of the loop under the writer, with the profiler window and the scalars;
    the window's start and end go into ``marks`` (loop_phases)."""
    out = _LoopSteps()
    scalars = step_scalars(trainer)
    for index in range(loop.steps):
        profiling = loop.is_profiled(index)
        if profiling and index == loop.warmup_steps:
            marks["profile"] = time.perf_counter()
            tf.profiler.experimental.start(str(loop.logdir))
            out.profile_dir = str(loop.logdir)
        outcome = run_one_step(trainer, iterator, index, scalars=scalars, traced=profiling)
        if profiling:
            out.profiled.append(index)
            if index == loop.warmup_steps + loop.profile_steps - 1:
                tf.profiler.experimental.stop()
                marks["profile_end"] = time.perf_counter()
        out.step_s.append(outcome.step_s)
        out.losses.append(outcome.loss)
        out.accuracies.append(outcome.accuracy)
        out.tower_losses = outcome.tower_losses
        if on_step is not None:
            on_step(index, outcome.loss, outcome.step_s)
    if scalars is not None:
        scalars.flush()
    if out.profile_dir is not None and len(out.profiled) < loop.profile_steps:
        tf.profiler.experimental.stop()  # the run was shorter than the window
    return out


@dataclass(frozen=True)
class Evaluation:
    """Held-out loss and accuracy with the raw weights and the moving averages (None:
    no moving average)."""

    loss: float
    accuracy: float
    loss_ema: float | None
    accuracy_ema: float | None


def _evaluate_and_log(trainer: Trainer, eval_x: np.ndarray, eval_y: np.ndarray,
                      loop: LoopConfig) -> Evaluation:
    """The moving average brought up to date, both evaluations, their scalars (under the
    writer)."""
    sync = getattr(trainer, "sync_ema", None)
    if sync is not None:  # towers bring the moving average up to date one step late
        sync()
    eval_loss, eval_acc = evaluate(trainer.model.forward, trainer.raw_params(), eval_x, eval_y,
                                   loop.eval_batch)
    tf.summary.scalar(layout.TAG_EVAL_LOSS, eval_loss, step=loop.steps)
    tf.summary.scalar(layout.TAG_EVAL_ACCURACY, eval_acc, step=loop.steps)
    eval_loss_ema = eval_acc_ema = None
    if trainer.ema is not None:
        eval_loss_ema, eval_acc_ema = evaluate(
            trainer.model.forward, trainer.ema_params(), eval_x, eval_y, loop.eval_batch
        )
        tf.summary.scalar(layout.TAG_EVAL_LOSS_EMA, eval_loss_ema, step=loop.steps)
        tf.summary.scalar(layout.TAG_EVAL_ACCURACY_EMA, eval_acc_ema, step=loop.steps)
    return Evaluation(eval_loss, eval_acc, eval_loss_ema, eval_acc_ema)


class StepScalars:
    """Every per-step scalar (loss, accuracy, learning rate, per-tower or per-replica loss,
    examples/sec, sec/batch, global norms), buffered in Python and written in one
    tf.function call every ``flush_every`` steps.

    The loop fetches these numbers after each step anyway (the loss fetch is what waits
    for the step); writing them from inside the step would add summary ops to every step,
    and an eager ``tf.summary.scalar`` costs about 0.3 ms of Python per call, as much as
    a small model's whole step on a GPU. Create and flush it under its writer.
    ``slice_loss_tag`` names slice i's loss (layout.tower_loss_tag or replica_loss_tag);
    ``norm_tags`` the step's norms, in the order the step returns them.
    """

    def __init__(self, global_batch: int, n_towers: int, learning_rate: float,
                 flush_every: int = 5, *,
                 slice_loss_tag: Callable[[int], str] = layout.tower_loss_tag,
                 norm_tags: tuple[str, ...] = ()) -> None:
        self.global_batch = float(global_batch)
        self.n_towers = n_towers
        self.learning_rate = float(learning_rate)
        self.flush_every = flush_every
        self.slice_loss_tags = [slice_loss_tag(t) for t in range(n_towers)]
        self.norm_tags = norm_tags
        self._rows: list[tuple[int, float, float, float, list[float], list[float]]] = []
        # Traced per batch length (flush_every, and once the shorter last batch) and
        # unrolled: straight-line summary ops run faster than a tf.while_loop of them.
        # Tracing grows with the batch (about 0.1 s per step's scalars on 2 busy cores):
        # 5 keeps the one trace short (25 took 2.5 s of every configuration).
        self._write = tf.function(self._write_all)

    def _write_all(self, steps: tf.Tensor, step_s: tf.Tensor, loss: tf.Tensor,
                   accuracy: tf.Tensor, towers: tf.Tensor, norms: tf.Tensor) -> tf.Tensor:
        for i in range(steps.shape[0]):
            step = steps[i]
            tf.summary.scalar(layout.TAG_TRAIN_LOSS, loss[i], step=step)
            tf.summary.scalar(layout.TAG_TRAIN_ACCURACY, accuracy[i], step=step)
            tf.summary.scalar(layout.TAG_TRAIN_LEARNING_RATE, self.learning_rate, step=step)
            tf.summary.scalar(layout.TAG_TRAIN_EXAMPLES_PER_S, self.global_batch / step_s[i],
                              step=step)
            tf.summary.scalar(layout.TAG_TRAIN_STEP_S, step_s[i], step=step)
            for t, tag in enumerate(self.slice_loss_tags):
                tf.summary.scalar(tag, towers[i, t], step=step)
            for k, tag in enumerate(self.norm_tags):
                tf.summary.scalar(tag, norms[i, k], step=step)
        return tf.shape(steps)[0]

    def add(self, step: int, step_s: float, loss: float, accuracy: float,
            tower_losses: list[float], norms: list[float] | None = None) -> None:
        self._rows.append((step, step_s, loss, accuracy, tower_losses,
                           (norms or [])[:len(self.norm_tags)]))
        if len(self._rows) >= self.flush_every:
            self.flush()

    def flush(self) -> None:
        if not self._rows:
            return
        steps, step_s, loss, acc, towers, norms = zip(*self._rows, strict=True)
        self._write(tf.constant(steps, tf.int64), tf.constant(step_s, tf.float32),
                    tf.constant(loss, tf.float32), tf.constant(acc, tf.float32),
                    tf.constant(towers, tf.float32),
                    tf.constant(norms, tf.float32, shape=[len(steps), len(self.norm_tags)]))
        self._rows = []


def step_scalars(trainer: Trainer) -> StepScalars | None:
    """The scalar buffer for ``trainer`` (None when its instrumentation has no scalars)."""
    if not trainer_scalars(trainer):
        return None
    lr = float(np.asarray(trainer.optimizer.learning_rate))
    norm_tags: tuple[str, ...] = (layout.TAG_NORM_GRADIENTS,)
    if trainer.ema is not None:
        norm_tags += (layout.TAG_NORM_EMA,)
    return StepScalars(trainer.global_batch, len(trainer.devices), lr,
                       slice_loss_tag=(layout.replica_loss_tag
                                       if trainer.strategy_name == "mirrored"
                                       else layout.tower_loss_tag),
                       norm_tags=norm_tags)


@dataclass(frozen=True)
class StepOutcome:
    step_s: float  # wall time of the step and the fetch of its loss
    loss: float
    accuracy: float
    tower_losses: list[float]


def run_one_step(trainer: Trainer, iterator: Any, index: int, *,
                 scalars: StepScalars | None = None, traced: bool = False) -> StepOutcome:
    """One training step as the loop runs it: the step (with histograms when due), the
    fetch of its results (the loss fetch waits for the step), and its scalars into the
    buffer (``scalars``). benchmarks/ time exactly this."""
    marker = (tf.profiler.experimental.Trace(layout.PROFILER_STEP_MARKER, step_num=index,
                                                 _r=1)
              if traced else contextlib.nullcontext())
    instr = getattr(trainer, "instr", None)
    histograms = instr is not None and summaries.histogram_due(instr, index + 1)
    t0 = time.perf_counter()
    with marker:
        out = trainer.run_step(iterator, histograms)
        loss = float(out["loss"])
    dt = time.perf_counter() - t0
    outcome = StepOutcome(dt, loss, float(out["accuracy"]),
                          [float(v) for v in out["tower_losses"].numpy()])
    if scalars is not None:
        norms = out.get("norms")
        scalars.add(index + 1, dt, loss, outcome.accuracy, outcome.tower_losses,
                    None if norms is None else [float(v) for v in norms.numpy()])
    return outcome


def trainer_scalars(trainer: Trainer) -> bool:
    instr = getattr(trainer, "instr", None)
    return bool(instr is None or instr.scalars)


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan
