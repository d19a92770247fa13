"""A user's loop that changes its working directory, trains, then dies of SIGSEGV.

Run with a relative --logdir: gpudiag's trace of the profiled window and the crash's
Python stack must still land in the run directory, not under the new working directory.
"""

import ctypes
import os
import sys

os.chdir(sys.argv[1])
import tensorflow as tf  # noqa: E402

w = tf.Variable(tf.ones([32, 32]))


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-4 * tape.gradient(loss, w))
    return loss


x = tf.random.normal([16, 32])
for _ in range(30):
    loss = step(x)
print("30 steps in", sys.argv[1], "loss", float(loss), flush=True)


def crash_in_user_code():
    ctypes.string_at(0)  # SIGSEGV, as a broken extension would


crash_in_user_code()
