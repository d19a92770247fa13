"""A user's first try at MirroredStrategy on a machine without GPUs (issue 46): the CPU split
into two logical devices, one replica on each, the global batch left at 32 (16 a replica).
Both replicas share the same cores, so the strategy adds an all-reduce and adds no compute.

Tiny: 2048 examples of 64 features, 2 epochs. Exit 0.
"""

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices('CPU')
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
print(f'Number of devices: {strategy.num_replicas_in_sync}')

rng = np.random.default_rng(0)
x_train = rng.normal(size=(2048, 64)).astype("float32")
y_train = x_train[:, :10].argmax(axis=1)

BATCH_SIZE = 32

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Dense(256, activation='relu', input_shape=(64,)),
        tf.keras.layers.Dense(256, activation='relu'),
        tf.keras.layers.Dense(10)
    ])
    model.compile(optimizer='adam',
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=['accuracy'])

model.fit(x_train, y_train, batch_size=BATCH_SIZE, epochs=2, verbose=2)
