"""Where a step function's loss is among its outputs (gpudiag.inprogram.functions), found
once and then kept, with real TensorFlow tensors."""

from __future__ import annotations

import tensorflow as tf

from gpudiag.inprogram.functions import LossFinder, loss_path


def test_the_loss_is_found_in_each_shape_of_output_a_step_returns() -> None:
    loss, logits = tf.constant(0.5), tf.zeros([4, 3])
    assert loss_path(loss) == ()
    assert loss_path({"accuracy": tf.constant(3), "loss": loss}) == ("loss",)
    assert loss_path((logits, loss)) == (1,)
    assert loss_path([logits]) is None  # no scalar float
    assert loss_path(tf.constant(2)) is None  # an integer is no loss


def test_the_finder_returns_each_calls_own_loss_and_follows_a_changed_output() -> None:
    find = LossFinder()
    first, second = tf.constant(1.0), tf.constant(2.0)
    assert find({"loss": first}) is first
    assert find({"loss": second}) is second  # kept path, this call's tensor
    third = tf.constant(3.0)
    assert find((tf.zeros([2]), third)) is third  # another structure: looked for again
    assert find(tf.constant([1.0, 2.0])) is None  # a vector: no loss
    assert find(tf.constant(4, tf.int64)) is None
    assert find({"loss": tf.constant(5.0, tf.float64)}).numpy() == 5.0  # another dtype
