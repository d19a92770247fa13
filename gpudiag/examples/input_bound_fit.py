"""A Keras fit fed by a ``Dataset.map`` that makes one example at a time, each waiting 2 ms
in Python: ``read_example`` (a ``tf.py_function``) sleeps, standing in for the latency of
reading the example from storage (a network file system, an object store, a database:
the thread waits, the CPU does not, and Python lets the GIL go while it waits). The fit
waits for its input (input-bound: a real bottleneck); ``num_parallel_calls`` on the map
overlaps the waits on tf.data's threads, busy cores or not. `make demo`'s program for
`gpudiag run` and `gpudiag try` (scripts/demo.py)."""

import time

import numpy as np
import tensorflow as tf

READ_LATENCY_S = 0.002  # one example's read from storage: waited for, not computed

tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1536, 16)).astype("float32")
y = x[:, :4].argmax(axis=1).astype("int64")


def read_example(features):  # the storage's latency: this thread waits
    time.sleep(READ_LATENCY_S)
    return features


def augment(features, label):  # per example: read it (2 ms waiting), then scale it
    read = tf.ensure_shape(tf.py_function(read_example, [features], tf.float32), (16,))
    return read * 0.5, label


dataset = tf.data.Dataset.from_tensor_slices((x, y))
dataset = dataset.map(augment).batch(32)

model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(dataset, epochs=3, verbose=2)
