"""A user's custom loop that runs 31 steps, then hangs (a lock that never comes free, a
peer that never answers), until it is killed: SIGKILL, as a user or a scheduler would.

    python hangs_after_steps.py STEPS
"""

import sys
import threading

import tensorflow as tf

w = tf.Variable(tf.ones([16, 16]))


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-4 * tape.gradient(loss, w))
    return loss


x = tf.random.normal([8, 16])
for _ in range(int(sys.argv[1])):
    loss = step(x)
print("hanging after", sys.argv[1], "steps, loss", float(loss), flush=True)
threading.Event().wait()
