"""The official "Distributed training with Keras" tutorial, as written: MirroredStrategy,
a convnet compiled and fitted inside strategy.scope().

Source: tensorflow/docs site/en/tutorials/distribute/keras.ipynb
Adapted only where no internet and no GPU force it:
- generated learnable data of MNIST's shapes (28x28x1 in [0, 1], 10 classes) instead of
  tensorflow_datasets' mnist;
- two logical CPU devices for the two replicas;
- 512 images, 3 epochs, no checkpoint/TensorBoard/learning-rate callbacks.
"""

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices('CPU')
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

strategy = tf.distribute.MirroredStrategy()
print('Number of devices: {}'.format(strategy.num_replicas_in_sync))

rng = np.random.default_rng(0)
templates = rng.uniform(size=(10, 28, 28, 1)).astype("float32")
labels = rng.integers(0, 10, 512)
images = np.clip(templates[labels] + 0.3 * rng.normal(size=(512, 28, 28, 1)), 0, 1)
mnist_train = tf.data.Dataset.from_tensor_slices((images.astype("float32"), labels))

BUFFER_SIZE = 512
BATCH_SIZE_PER_REPLICA = 32
BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync


def scale(image, label):
    image = tf.cast(image, tf.float32)
    return image, label


train_dataset = mnist_train.map(scale).cache().shuffle(BUFFER_SIZE).batch(BATCH_SIZE)

with strategy.scope():
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation='relu', input_shape=(28, 28, 1)),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation='relu'),
        tf.keras.layers.Dense(10)
    ])

    model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  optimizer=tf.keras.optimizers.Adam(),
                  metrics=['accuracy'])

EPOCHS = 3
model.fit(train_dataset, epochs=EPOCHS, verbose=2)
