"""A user's custom training loop: a tf.function step, ``next(iterator)`` and Python work
between the calls (bookkeeping a user does each step). The program times its own loop,
start to start, and prints the median period of its steady-state steps. Exit 0.
"""

import itertools
import json
import statistics
import time

import numpy as np
import tensorflow as tf

STEPS = 240
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 32)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
iterator = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32))
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(4)])
optimizer = tf.keras.optimizers.SGD(0.05)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


def bookkeeping(step):  # the Python work between steps: a few ms of pure Python
    total = 0
    for k in range(50000):
        total += (k * step) % 7
    return total


starts = []
for step in range(STEPS):
    starts.append(time.perf_counter())
    features, labels = next(iterator)
    loss = train_step(features, labels)
    bookkeeping(step)
periods = [b - a for a, b in itertools.pairwise(starts)]
print("own periods:", json.dumps([*periods, None]))
print(f"own period median ms: {statistics.median(periods[10:]) * 1e3:.4f}")
print("final loss", round(float(loss), 4))
