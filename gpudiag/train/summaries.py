"""What a training run records besides the update itself, and how it writes it.

One run directory per configuration (``<strategy>-<n>dev/``) holds TF2 summary event
files (``tf.summary``); the tag names are gpudiag/layout/__init__.py's (its docstring lists what
is on disk):

==========================  ==========  =================================================
tag (gpudiag.layout)        kind        written
==========================  ==========  =================================================
TAG_TRAIN_LOSS ...          scalar      every step: loss, accuracy, learning rate,
                                        examples/sec, sec/batch (TAG_TRAIN_*)
tower_loss_tag(i)           scalar      every step (towers): the loss of tower i's slice
replica_loss_tag(i)         scalar      every step (mirrored): the loss of replica i's
TAG_NORM_GRADIENTS          scalar      every step: global norm of the averaged gradients
TAG_NORM_EMA                scalar      every step: global norm of the moving averages
                                        (towers: as they enter the step, see catch_up_ema)
gradient_tag(param)         histogram   step 1 and every K, the first and the last layer's
variable_tag(param)         histogram   kernel only (``histogram_params``): the averaged
                                        gradient and the weights after the update
TAG_EVAL_ACCURACY ...       scalar      at the end: held-out set, raw weights
TAG_EVAL_ACCURACY_EMA ...   scalar      at the end: held-out set, moving-average weights
==========================  ==========  =================================================

Why these: the global norms show, every step and in two numbers, whether the gradients
vanish or explode and whether the moving average follows the weights; two layers' full
histograms (the input side and the output side of the network) show how the
distribution moves without a card per parameter. Every step's scalars are buffered by
the loop (gpudiag.train.loop.StepScalars) and written 5 steps at a time, so they
appear in TensorBoard in batches; K is ``--histogram-every``. The configuration itself
(hyperparameters, the report's figures) is written by the parent as an HParams session
(gpudiag/scaling/tb_runs.py). Plus a checkpoint under ``layout.CHECKPOINT_DIR`` and the
profiler trace under ``plugins/profile/<ts>/<host>.xplane.pb``. Step numbers start at 1
(the first update).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import tensorflow as tf

from gpudiag.layout import gradient_tag, variable_tag
from gpudiag.records.training import Workload

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


def apply_ema(ema: tf.train.ExponentialMovingAverage, decay: float, step: tf.Tensor,
              params: Sequence[tf.Variable], gate: tf.Tensor | float = 1.0) -> None:
    """``ema.apply(params)`` for plain (not distributed) variables in fewer ops: the same
    update, shadow -= (1 - d) * (shadow - weight) with d = min(decay, (1 + step) /
    (10 + step)), as one fused ResourceApplyGradientDescent per variable instead of the
    six ops and the replica-context merge ``apply`` builds for each. ``step`` is the
    step counter of the weights being averaged (``ema``'s ``num_updates``); ``gate`` 0
    makes it a no-op. tests/e2e/test_train.py checks it against ``ema.apply``.
    """
    n = tf.cast(step, tf.float32)
    alpha = (1.0 - tf.minimum(tf.constant(decay, tf.float32), (1.0 + n) / (10.0 + n))) * gate
    for v in params:
        shadow = ema.average(v)
        tf.raw_ops.ResourceApplyGradientDescent(var=shadow.handle, alpha=alpha,
                                                delta=shadow - v)


def catch_up_ema(ema: tf.train.ExponentialMovingAverage, decay: float, step: tf.Variable,
                 ema_step: tf.Variable, params: Sequence[tf.Variable]) -> None:
    """Bring the moving average up to the weights after update ``step``, once: a no-op when
    it holds them already (``ema_step``, the last update it holds, is not behind).

    The towers' step calls it first, for the previous step's weights, so the average's
    update runs beside the step's forward and backward pass instead of after its weight
    update, where it lengthened every step by several percent
    (benchmarks/instrumentation_cost.py); the loop calls it once more after the last
    step. The numbers are ``ExponentialMovingAverage.apply``'s after every update.
    """
    n = step.read_value()
    apply_ema(ema, decay, n, params, gate=tf.cast(ema_step < n, tf.float32))
    ema_step.assign(n)


HistogramValues = Callable[[], tuple[Sequence[Any], Sequence[Any]]]


def histogram_due(instr: Instrumentation, step: int) -> bool:
    """Whether update ``step`` (1-based) writes histograms: the first and every K-th.

    Decided in Python, and the step's tf.function traced once with and once without the
    histogram ops (the classic ``if step % K == 0: run(summary_op)``): a ``tf.cond``
    inside every step would cost every step, the histograms only every K-th.
    """
    k = instr.histogram_every
    return bool(k) and (step == 1 or step % k == 0)


def histogram_params(names: Sequence[str]) -> list[int]:
    """Indices of the parameters with full histograms: the first and the last kernel
    (the network's input and output side); every parameter when there is no kernel."""
    kernels = [i for i, n in enumerate(names) if n.endswith("kernel")]
    if not kernels:
        return list(range(len(names)))
    return sorted({kernels[0], kernels[-1]})


def write_histograms(
    step: tf.Tensor, names: Sequence[str], histogram_values: HistogramValues
) -> None:
    """Histograms of the averaged gradients and the weights of ``histogram_params``,
    in-graph.

    Called only in the step function's histogram trace (see ``histogram_due``), so what
    ``histogram_values`` computes costs nothing on the other steps.
    """
    gradients, variables = histogram_values()
    for i in histogram_params(names):
        tf.summary.histogram(gradient_tag(names[i]), gradients[i], step=step)
        tf.summary.histogram(variable_tag(names[i]), variables[i], step=step)


def global_norm(tensors: Sequence[Any]) -> tf.Tensor:
    """sqrt(sum of squares) over ``tensors``: one ``l2_loss`` (sum(t**2) / 2) per tensor,
    the fewest ops a step can spend on it."""
    return tf.sqrt(2.0 * tf.add_n([tf.nn.l2_loss(t) for t in tensors]))


def step_norms(gradients: Sequence[Any], ema_values: Sequence[Any] | None) -> tf.Tensor:
    """[global norm of the averaged gradients, of the moving averages] of one step (the
    second only with a moving average): TAG_NORM_GRADIENTS, TAG_NORM_EMA."""
    norms = [global_norm(gradients)]
    if ema_values is not None:
        norms.append(global_norm(ema_values))
    return tf.stack(norms)
