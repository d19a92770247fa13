"""A custom training loop whose ``@tf.function`` step takes the learning rate and the step
counter as Python numbers: ``train_step(x, y, lr, step)`` with ``lr`` decayed by hand
every step (a Python float) and ``step`` the loop's ``int``. Each new value is a new
trace (TensorFlow warns "N out of the last N calls to <function train_step> triggered
tf.function retracing"), as in the threads that ask why such a loop is slow (e.g.
yerkojahve/Meta-Pseudo-label#1: ``learning_rate`` and ``temperature`` passed as Python
values to a tf.function ``train_step`` in a while loop).

    python retrace_python_lr.py [tensor]

``tensor`` is the fix: ``train_step(x, y, tf.constant(lr), tf.constant(step))`` (one
trace). The program times its own loop and prints its median step (``own step ms:``).
Exit 0.
"""

import statistics
import sys
import time

import numpy as np
import tensorflow as tf

FIXED = "tensor" in sys.argv[1:]
STEPS = 24
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_all = rng.standard_normal((STEPS * 32, 16)).astype("float32")
y_all = (x_all[:, :4].argmax(axis=1)).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).batch(32)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y, lr, step):
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    for v, g in zip(model.trainable_variables, grads, strict=True):
        v.assign_sub(lr * g)  # plain SGD with the hand-decayed rate
    if step % 10 == 0:
        tf.print("step", step, "loss", loss)
    return loss


base_lr, times = 0.1, []
for step, (x, y) in enumerate(dataset):
    lr = base_lr * 0.97 ** step
    t0 = time.perf_counter()
    if FIXED:
        loss = train_step(x, y, tf.constant(lr, tf.float32), tf.constant(step))
    else:
        loss = train_step(x, y, lr, step)
    times.append(time.perf_counter() - t0)
print(f"own step ms: {statistics.median(times[5:]) * 1e3:.3f}")
print("final loss", round(float(loss), 4))
