"""The slow and fixed programs of benchmarks/whatif.py, as TensorFlow's guides write them.

    python _whatif_workload.py spe 1|16     Keras fit of a small model (keras-io's
                                            "Customizing what happens in fit": small models
                                            gain from steps_per_execution)
    python _whatif_workload.py eager|graph  a custom training step (the tf.function guide:
                                            the same step eager, then under tf.function)
"""

import sys

import numpy as np
import tensorflow as tf

tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 16)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

if sys.argv[1] == "spe":
    model.compile("sgd", loss_fn, steps_per_execution=int(sys.argv[2]))
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)
else:
    optimizer = tf.keras.optimizers.SGD(0.01)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat(2)

    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    step = tf.function(train_step) if sys.argv[1] == "graph" else train_step
    for features, labels in data:
        step(features, labels)
