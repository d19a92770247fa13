"""A Keras fit whose every example goes through 150 small matmuls in a ``Dataset.map``
made one at a time (tests/programs/input_pipeline_fit.py's default path), so the fit
waits for its input: `make demo`'s program for `gpudiag run` and `gpudiag try`."""

import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1536, 16)).astype("float32")
y = x[:, :4].argmax(axis=1).astype("int64")
W = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)


def augment(features, label):  # expensive per example: 150 small matmuls
    m = tf.tile(tf.reshape(features, (1, 16)), (48, 3))
    for _ in range(150):
        m = tf.tanh(tf.matmul(m, W))
    return features + tf.reduce_mean(m) * 1e-3, label


dataset = tf.data.Dataset.from_tensor_slices((x, y))
dataset = dataset.map(augment).batch(32)

model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(dataset, epochs=3, verbose=2)
