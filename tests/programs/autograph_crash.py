"""A step tf.function whose converted Python code (a tensor `if`: autograph) fails while
being traced: the crash must be placed at this file's line, not autograph's generated one."""

import tensorflow as tf


@tf.function
def step(x):
    if tf.reduce_sum(x) > 0:  # noqa: SIM108 (an if statement: autograph converts it)
        y = tf.matmul(x, tf.ones([3, 3]))  # the bug: [2, 2] @ [3, 3]
    else:
        y = x
    return y


step(tf.ones([2, 2]))
