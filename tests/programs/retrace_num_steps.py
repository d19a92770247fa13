"""The tf.function guide's retracing example made a training program: ``train(num_steps)``
runs a few steps of a small model inside one tf.function, and the program calls it with a
Python int, a new value each time, so TensorFlow traces it again at every call
(site/en/guide/function.ipynb, "Python or Tensor args?").

    python retrace_num_steps.py [tensor]

``tensor`` is the guide's fix: ``train(num_steps=tf.constant(n))`` (one trace). The
program times its own calls and prints them (``own calls ms:``). Exit 0.
"""

import json
import sys
import time

import tensorflow as tf

FIXED = "tensor" in sys.argv[1:]
tf.keras.utils.set_random_seed(0)
x = tf.random.normal([256, 32])
y = tf.random.uniform([256], maxval=4, dtype=tf.int64)
model = tf.keras.Sequential([tf.keras.Input((32,)), tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(4)])
optimizer = tf.keras.optimizers.SGD(0.05)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def train_one_step():
    with tf.GradientTape() as tape:
        loss = loss_fn(y, model(x, training=True))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def train(num_steps):
    loss = tf.constant(0.0)
    for _ in tf.range(num_steps):
        loss = train_one_step()
    return loss


calls = []
for n in range(10, 34):
    t0 = time.perf_counter()
    loss = train(num_steps=tf.constant(n) if FIXED else n)
    calls.append((time.perf_counter() - t0) * 1e3)
print("own calls ms:", json.dumps([round(c, 3) for c in calls]))
print("final loss", round(float(loss), 4))
