"""A user's Keras fit under MirroredStrategy over two devices the program makes by splitting
the CPU: a large dense layer (4M weights) and a small batch, so the all-reduce is a large
share of the step. Exit 0."""

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
tf.keras.utils.set_random_seed(0)
strategy = tf.distribute.MirroredStrategy(["/cpu:1", "/cpu:2"])
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 2048)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(4).prefetch(2)

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((2048,)), tf.keras.layers.Dense(2048),
                                 tf.keras.layers.Dense(4)])
    model.compile(tf.keras.optimizers.SGD(0.002),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(dataset, steps_per_epoch=30, epochs=1, verbose=0)
print("done")
