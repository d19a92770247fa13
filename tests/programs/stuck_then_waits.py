"""A 10-class custom loop that cannot learn (a learning rate of 0, a zero-initialised
output layer: the loss is ln 10 at every step), 150 steps, then waits for a file before it
ends (a long job, frozen at a moment the test chooses).

    python stuck_then_waits.py GATE_FILE
"""

import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

gate = Path(sys.argv[1])
rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 32)).astype("float32")
y = x[:, :10].argmax(axis=1).astype("int64")
iterator = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32))
model = tf.keras.Sequential([tf.keras.Input((32,)),
                             tf.keras.layers.Dense(10, kernel_initializer="zeros")])
optimizer = tf.keras.optimizers.SGD(learning_rate=0.0)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def train_step(features, labels):
    with tf.GradientTape() as tape:
        loss = loss_fn(labels, model(features, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


for _ in range(150):
    loss = train_step(*next(iterator))
print(f"waiting after 150 steps, loss {float(loss):.4f}", flush=True)
deadline = time.monotonic() + 300  # a test that never opens the gate fails, not hangs
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print("done", flush=True)
