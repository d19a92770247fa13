"""What a training run records besides the update itself, and how it writes it.

One run directory per configuration (``<strategy>-<n>dev/``) holds TF2 summary event
files (``tf.summary``); the tag names are gpudiag/layout.py's (its docstring lists what
is on disk):

==========================  ==========  =================================================
tag (gpudiag.layout)        kind        written
==========================  ==========  =================================================
TAG_TRAIN_LOSS ...          scalar      every step: loss, accuracy, learning rate,
                                        examples/sec, sec/batch (TAG_TRAIN_*)
tower_loss_tag(i)           scalar      every step: the loss of tower (replica) i's slice
gradient_tag(param)         histogram   step 1 and every K: the gradient averaged over towers
variable_tag(param)         histogram   step 1 and every K: the weights after the update
ema_tag(param)              histogram   step 1 and every K: the moving-average weights
TAG_EVAL_ACCURACY ...       scalar      at the end: held-out set, raw weights
TAG_EVAL_ACCURACY_EMA ...   scalar      at the end: held-out set, moving-average weights
TAG_TRAIN_CONFIG            text        once: the configuration as a markdown table
==========================  ==========  =================================================

Every step's scalars are buffered by the loop (gpudiag.train.loop.StepScalars) and
written 25 steps at a time, so they appear in TensorBoard in batches; K is
``--histogram-every``. Plus the hparams plugin's session summary (the configuration),
a checkpoint under ``layout.CHECKPOINT_DIR`` and the profiler trace under
``plugins/profile/<ts>/<host>.xplane.pb``. Step numbers start at 1 (the first update).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from gpudiag.layout import ema_tag, gradient_tag, variable_tag
from gpudiag.probes.records import Workload

_DEFAULT = Workload()  # `gpudiag scaling`'s defaults, defined once


@dataclass(frozen=True)
class Instrumentation:
    """What the training step records besides the update itself.

    ``histogram_every`` 0 turns histograms off; ``ema_decay`` None turns the moving average
    off. ``scalars`` covers every per-step scalar. benchmarks/instrumentation_cost.py
    compares a step with all of it against a step with none of it.
    """

    scalars: bool = True
    histogram_every: int = _DEFAULT.histogram_every
    ema_decay: float | None = _DEFAULT.ema_decay or None

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
        tf.summary.histogram(gradient_tag(name), grad, step=step)
        tf.summary.histogram(variable_tag(name), var, step=step)
    for name, avg in zip(names, ema_values or [], strict=False):
        tf.summary.histogram(ema_tag(name), avg, step=step)
