"""A user's Keras fit fed by a tf.data pipeline with an expensive per-example ``map``.

``python input_pipeline_fit.py``: the map runs one example at a time, every epoch, and
nothing is prefetched (input-bound). ``python input_pipeline_fit.py tuned``: the fixes
tf.data's guide gives: the same map with ``num_parallel_calls=tf.data.AUTOTUNE``, its
result cached (the data set is small and re-read every epoch) and ``prefetch``.
``python input_pipeline_fit.py parallel``: the map in parallel, ``repeat()`` and
``prefetch`` at the end, no cache (fit with ``steps_per_epoch``): parallel map and
prefetch are in place, so what is left is the map's own per-element cost.
A callback times the program's own batches, start to start, and prints each batch's
period (None for an epoch's last) and the median period of the steady-state batches (the
epochs after the first).
"""

import itertools
import json
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

TUNED = sys.argv[1:] == ["tuned"]
PARALLEL = sys.argv[1:] == ["parallel"]
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1536, 16)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
W = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)


def augment(features, label):  # expensive per example: 150 small matmuls
    m = tf.tile(tf.reshape(features, (1, 16)), (48, 3))
    for _ in range(150):
        m = tf.tanh(tf.matmul(m, W))
    return features + tf.reduce_mean(m) * 1e-3, label


dataset = tf.data.Dataset.from_tensor_slices((x, y))
if TUNED:
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).cache().batch(
        32).prefetch(tf.data.AUTOTUNE)
elif PARALLEL:
    dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(
        32).repeat().prefetch(tf.data.AUTOTUNE)
else:
    dataset = dataset.map(augment).batch(32)


class OwnClock(tf.keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.starts = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append((self.epoch, time.perf_counter()))

    def on_epoch_begin(self, epoch, logs=None):
        self.epoch = epoch


model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
clock = OwnClock()
model.fit(dataset, epochs=3, verbose=0, callbacks=[clock],
          steps_per_epoch=len(x) // 32 if PARALLEL else None)
periods = [b[1] - a[1] if a[0] == b[0] else None for a, b in itertools.pairwise(clock.starts)]
print("own periods:", json.dumps([*periods, None]))
steady = [p for (epoch, _), p in zip(clock.starts, periods, strict=False) if epoch >= 1 and p]
print(f"own period median ms: {statistics.median(steady) * 1e3:.4f}")
