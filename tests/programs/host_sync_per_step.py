"""A custom training loop that reads its loss and accuracy back to Python every step, the
way the Keras guide's loop ("Writing a training loop from scratch") does every 100 steps
and users do every step: ``float(loss_value)`` into a history list and
``train_acc_metric.result().numpy()`` for a log line. Each read waits for the step's
result (a host sync per step).

    python host_sync_per_step.py [every50]

``every50`` is the fix: the loss kept as a tensor, read every 50 steps. The program times
its own loop and prints its median step period (``own period ms:``). Exit 0.
"""

import itertools
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

FIXED = "every50" in sys.argv[1:]
STEPS = 150
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_all = rng.standard_normal((2048, 32)).astype("float32")
y_all = (x_all[:, :4].argmax(axis=1)).astype("int64")
train_dataset = tf.data.Dataset.from_tensor_slices((x_all, y_all)).repeat().batch(64)
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(128, activation="relu"),
                             tf.keras.layers.Dense(4)])
optimizer = tf.keras.optimizers.Adam(1e-3)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = tf.keras.metrics.SparseCategoricalAccuracy()


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
    train_acc_metric.update_state(y, logits)
    return loss_value


history, starts = [], []
for step, (x, y) in enumerate(train_dataset.take(STEPS)):
    starts.append(time.perf_counter())
    loss_value = train_step(x, y)
    if FIXED:
        if step % 50 == 0:
            print(f"step {step}: loss {float(loss_value):.4f}")
    else:
        history.append(float(loss_value))
        acc = train_acc_metric.result().numpy()
        if step % 50 == 0:
            print(f"step {step}: loss {history[-1]:.4f} acc {acc:.3f}")
periods = [b - a for a, b in itertools.pairwise(starts)]
print(f"own period ms: {statistics.median(periods[10:]) * 1e3:.3f}")
print("final loss", round(float(loss_value), 4))
