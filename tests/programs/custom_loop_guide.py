"""keras-io's "Writing a training loop from scratch" (TensorFlow backend) on random data
in place of MNIST (no downloads here): a model, Adam, a ``train_step`` with GradientTape
and ``optimizer.apply_gradients``, a ``test_step`` for validation after each epoch, the
training set batched with a last partial batch.

    python custom_loop_guide.py function | eager | new-function-each-step

``function``: the guide's fast version (``@tf.function`` on both steps). ``eager``: the
guide's first version (no tf.function). ``new-function-each-step``: ``tf.function(train_step)``
made again inside the loop at each step. The program times its own training steps start
to start and prints them (``own periods:``). Exit 0.
"""

import itertools
import json
import sys
import time

import numpy as np
import tensorflow as tf
from tensorflow import keras

MODE = sys.argv[1] if len(sys.argv) > 1 else "function"
EPOCHS = 2  # 32 training steps: the profiler's window (steps 10-15) and a retrace each
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_train = rng.standard_normal((1000, 784)).astype("float32")
y_train = (x_train[:, :10].argmax(axis=1)).astype("int64")
x_val, y_val = x_train[-200:], y_train[-200:]

inputs = keras.Input(shape=(784,), name="digits")
x1 = keras.layers.Dense(64, activation="relu")(inputs)
x2 = keras.layers.Dense(64, activation="relu")(x1)
outputs = keras.layers.Dense(10, name="predictions")(x2)
model = keras.Model(inputs=inputs, outputs=outputs)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()
val_acc_metric = keras.metrics.SparseCategoricalAccuracy()

batch_size = 64
train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
train_dataset = train_dataset.shuffle(buffer_size=1024).batch(batch_size)
val_dataset = tf.data.Dataset.from_tensor_slices((x_val, y_val)).batch(batch_size)


def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
    train_acc_metric.update_state(y, logits)
    return loss_value


def test_step(x, y):
    val_logits = model(x, training=False)
    val_acc_metric.update_state(y, val_logits)


if MODE == "function":
    train_step = tf.function(train_step)
    test_step = tf.function(test_step)

starts = []
for epoch in range(EPOCHS):
    for _step, (x_batch_train, y_batch_train) in enumerate(train_dataset):
        starts.append(time.perf_counter())
        if MODE == "new-function-each-step":
            step_function = tf.function(train_step)
            loss_value = step_function(x_batch_train, y_batch_train)
        else:
            loss_value = train_step(x_batch_train, y_batch_train)
    train_acc = train_acc_metric.result()
    train_acc_metric.reset_state()
    for x_batch_val, y_batch_val in val_dataset:
        test_step(x_batch_val, y_batch_val)
    val_acc = val_acc_metric.result()
    val_acc_metric.reset_state()
    print(f"epoch {epoch}: training acc {float(train_acc):.4f}, validation acc "
          f"{float(val_acc):.4f}", flush=True)
periods = [b - a for a, b in itertools.pairwise(starts)]
print("own periods:", json.dumps([*periods, None]))
print("final loss", round(float(loss_value), 4))
