"""A user's custom loop that is killed with SIGKILL in the middle of training.

It configures devices, creates a MirroredStrategy, runs 30 steps of its tf.function, then
kills itself with SIGKILL (as the OOM killer or a scheduler would): no exit handler runs.
"""

import os
import signal

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
with strategy.scope():
    w = tf.Variable(tf.ones([64, 64]))


@tf.function
def step(x):
    def replica(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
        w.assign_sub(1e-4 * tape.gradient(loss, w))
        return loss
    return strategy.reduce("MEAN", strategy.run(replica, args=(x,)), axis=None)


x = tf.random.normal([32, 64])
for _ in range(30):
    loss = step(x)
print("about to be killed at step 30, loss", float(loss), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
