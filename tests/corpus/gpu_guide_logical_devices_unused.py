"""The TensorFlow GPU guide's "Using multiple GPUs" with the distributed Keras tutorial's
fit: the program creates 3 logical devices and gives its strategy only 2 of them.

Sources: tensorflow/docs site/en/guide/gpu.ipynb (logical devices, "With
tf.distribute.Strategy") and site/en/tutorials/distribute/keras.ipynb (MirroredStrategy
with Model.fit)
Adapted only where no GPU forces it: the physical CPU is split into logical devices (the
guide splits a GPU); generated learnable data of 16 features and 4 classes; 2 epochs.
"""

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices('CPU')
tf.config.set_logical_device_configuration(
    cpus[0],
    [tf.config.LogicalDeviceConfiguration(),
     tf.config.LogicalDeviceConfiguration(),
     tf.config.LogicalDeviceConfiguration()])
logical_cpus = tf.config.list_logical_devices('CPU')
print(len(cpus), "Physical CPU,", len(logical_cpus), "Logical CPUs")

strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
print('Number of devices: {}'.format(strategy.num_replicas_in_sync))

rng = np.random.default_rng(0)
x = rng.normal(size=(1024, 16)).astype("float32")
y = x[:, :4].argmax(axis=1)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(1024).batch(64)

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Input(shape=(16,)),
        tf.keras.layers.Dense(32, activation='relu'),
        tf.keras.layers.Dense(4),
    ])
    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.Adam(),
                  metrics=['accuracy'])

model.fit(dataset, epochs=2, verbose=2)
