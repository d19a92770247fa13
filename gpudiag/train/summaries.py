"""What a training run writes to its TensorBoard run directory, and under which tags.

One run directory per configuration (``<strategy>-<n>dev/``) holds TF2 summary event
files (``tf.summary``), read back with TensorBoard's EventAccumulator:

==========================  ==========  =================================================
tag                         kind        written
==========================  ==========  =================================================
train/loss                  scalar      every step: mean loss over the global batch
train/accuracy              scalar      every step: batch accuracy
train/learning_rate         scalar      every step
train/examples_per_s        scalar      every step: global batch / step wall time
train/step_s                scalar      every step: wall seconds per batch (sec/batch)
towers/loss_<i>             scalar      every step: the loss of tower (replica) i's slice
gradients/<param>           histogram   step 1 and every K: the gradient averaged over towers
variables/<param>           histogram   step 1 and every K: the weights after the update
ema/<param>                 histogram   step 1 and every K: the moving-average weights
eval/accuracy, eval/loss    scalar      at the end: held-out set, raw weights
eval/accuracy_ema, ...      scalar      at the end: held-out set, moving-average weights
gpudiag/config              text        once: the configuration as a markdown table
==========================  ==========  =================================================

Every step's scalars are buffered by the loop (gpudiag.train.loop.StepScalars) and
written 25 steps at a time, so they appear in TensorBoard in batches; K is
``--histogram-every`` (default 100). Plus the hparams plugin's session summary (the
configuration), a checkpoint under ``checkpoints/`` and the profiler trace under
``plugins/profile/<ts>/<host>.xplane.pb``.
Step numbers start at 1 (the first update).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

TAG_LOSS = "train/loss"
TAG_ACCURACY = "train/accuracy"
TAG_LEARNING_RATE = "train/learning_rate"
TAG_EXAMPLES_PER_S = "train/examples_per_s"
TAG_STEP_S = "train/step_s"
TAG_TOWER_LOSS = "towers/loss_{index}"
TAG_GRADIENT = "gradients/{param}"
TAG_VARIABLE = "variables/{param}"
TAG_EMA = "ema/{param}"
TAG_EVAL_ACCURACY = "eval/accuracy"
TAG_EVAL_LOSS = "eval/loss"
TAG_EVAL_ACCURACY_EMA = "eval/accuracy_ema"
TAG_EVAL_LOSS_EMA = "eval/loss_ema"
TAG_CONFIG = "gpudiag/config"
CHECKPOINT_DIR = "checkpoints"

DEFAULT_HISTOGRAM_EVERY = 100
DEFAULT_EMA_DECAY = 0.99


@dataclass(frozen=True)
class Instrumentation:
    """What the training step records besides the update itself.

    ``histogram_every`` 0 turns histograms off; ``ema_decay`` None turns the moving average
    off. ``scalars`` covers every per-step scalar. benchmarks/instrumentation_cost.py
    compares a step with all of it against a step with none of it.
    """

    scalars: bool = True
    histogram_every: int = DEFAULT_HISTOGRAM_EVERY
    ema_decay: float | None = DEFAULT_EMA_DECAY

    @classmethod
    def off(cls) -> Instrumentation:
        return cls(scalars=False, histogram_every=0, ema_decay=None)


def make_ema(decay: float | None, step: tf.Variable) -> tf.train.ExponentialMovingAverage | None:
    """tf.train.ExponentialMovingAverage with ``num_updates`` tied to the step counter.

    With ``num_updates`` the effective decay is min(decay, (1 + step) / (10 + step)), so
    the average follows the weights closely early on (the classic cifar10 example's use).
    """
    if decay is None:
        return None
    return tf.train.ExponentialMovingAverage(decay=decay, num_updates=step)


def param_tag(template: str, name: str) -> str:
    return template.format(param=name)


HistogramValues = Callable[[], tuple[Sequence[Any], Sequence[Any], Sequence[Any] | None]]


def histogram_due(instr: Instrumentation, step: int) -> bool:
    """Whether update ``step`` (1-based) writes histograms: the first and every K-th.

    Decided in Python, and the step's tf.function traced once with and once without the
    histogram ops (the classic ``if step % K == 0: run(summary_op)``): a ``tf.cond``
    inside every step would cost every step, the histograms only every K-th.
    """
    k = instr.histogram_every
    return bool(k) and (step == 1 or step % k == 0)


def write_histograms(
    step: tf.Tensor, names: Sequence[str], histogram_values: HistogramValues
) -> None:
    """Histograms of (averaged gradients, variables, moving averages or None), in-graph.

    Called only in the step function's histogram trace (see ``histogram_due``), so what
    ``histogram_values`` computes costs nothing on the other steps.
    """
    gradients, variables, ema_values = histogram_values()
    for name, grad, var in zip(names, gradients, variables, strict=True):
        tf.summary.histogram(param_tag(TAG_GRADIENT, name), grad, step=step)
        tf.summary.histogram(param_tag(TAG_VARIABLE, name), var, step=step)
    for name, avg in zip(names, ema_values or [], strict=False):
        tf.summary.histogram(param_tag(TAG_EMA, name), avg, step=step)
