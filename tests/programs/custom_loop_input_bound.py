"""keras-io's "Writing a training loop from scratch" loop (a ``@tf.function`` train_step
with GradientTape and Adam) fed by a tf.data pipeline whose ``map`` is expensive and
serial, the way tf.data's performance guide writes its slow version: the loop waits for
every batch.

    python custom_loop_input_bound.py [parallel]

``parallel``: the guide's fix, ``num_parallel_calls=tf.data.AUTOTUNE`` and ``prefetch``.
The loop takes its batches with ``next()`` and times itself: each step's period start to
start and the seconds inside ``next()`` (``own periods:``, ``own waits:``). Exit 0.
"""

import itertools
import json
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

PARALLEL = sys.argv[1:] == ["parallel"]
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_train = rng.standard_normal((4096, 32)).astype("float32")
y_train = (x_train[:, :10].argmax(axis=1)).astype("int64")
W = tf.constant(rng.standard_normal((32, 32)).astype("float32") * 0.1)


def augment(x, y):  # per example: 100 small matmuls
    m = tf.reshape(x, (1, 32))
    for _ in range(100):
        m = tf.tanh(tf.matmul(m, W))
    return x + tf.reshape(m, (32,)) * 1e-3, y


train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
if PARALLEL:
    train_dataset = train_dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(
        32).prefetch(tf.data.AUTOTUNE)
else:
    train_dataset = train_dataset.map(augment).batch(32)

model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(10)])
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss_value = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
    return loss_value


starts, waits = [], []
for epoch in range(2):
    iterator = iter(train_dataset)
    while True:
        t0 = time.perf_counter()
        try:
            x, y = next(iterator)
        except StopIteration:
            break
        waits.append(time.perf_counter() - t0)
        starts.append(t0)
        loss = train_step(x, y)
    print(f"epoch {epoch}: loss {float(loss):.4f}")
periods = [b - a for a, b in itertools.pairwise(starts)]
print("own periods:", json.dumps([*periods, None]))
print("own waits:", json.dumps(waits))
