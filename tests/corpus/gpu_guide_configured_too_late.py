"""The TensorFlow GPU guide's "Using multiple GPUs" set-up with a classic mistake: the
devices are configured after the program has already run an op, so the configuration is
refused ("Virtual devices cannot be modified after being initialized"); the guide's own
try/except prints the error and the program goes on with one device.

Source: tensorflow/docs site/en/guide/gpu.ipynb (the logical-device cells)
Adapted only where no GPU forces it: the physical CPU is split into 2 logical devices
(the guide splits a GPU: tf.config.list_physical_devices('GPU') is empty here), and a
small MirroredStrategy Keras fit (the guide's "With tf.distribute.Strategy" cell, with
generated data) uses whatever devices there are.
"""

import numpy as np
import tensorflow as tf

# Something runs first: here a normalisation constant, often a dataset or a model.
scale = tf.constant(255.0)

cpus = tf.config.list_physical_devices('CPU')
if cpus:
    # Create 2 virtual devices
    try:
        tf.config.set_logical_device_configuration(
            cpus[0],
            [tf.config.LogicalDeviceConfiguration(),
             tf.config.LogicalDeviceConfiguration()])
        logical_cpus = tf.config.list_logical_devices('CPU')
        print(len(cpus), "Physical CPU,", len(logical_cpus), "Logical CPUs")
    except RuntimeError as e:
        # Virtual devices must be set before devices have been initialized
        print(e)

strategy = tf.distribute.MirroredStrategy(tf.config.list_logical_devices('CPU'))
with strategy.scope():
    inputs = tf.keras.layers.Input(shape=(1,))
    predictions = tf.keras.layers.Dense(1)(inputs)
    model = tf.keras.models.Model(inputs=inputs, outputs=predictions)
    model.compile(loss='mse',
                  optimizer=tf.keras.optimizers.SGD(learning_rate=0.2))

x = np.linspace(-1, 1, 256).reshape(-1, 1).astype("float32")
model.fit(x, 3 * x + 1, batch_size=32, epochs=2, verbose=2)
