"""tensorflow/docs' data guide ("Applying arbitrary Python logic": tf.numpy_function /
tf.py_function in a map, site/en/guide/data.ipynb) with the step the guide warns about
left out: the mapped function's outputs get no shape (no ``set_shape``), so the model is
fed tensors of unknown shape.

Adapted only where no internet forces it: random 28x28 images and 10 classes (MNIST's
shapes) instead of the flowers download, and a numpy noise augmentation instead of
scipy's rotation.

Ground truth (TensorFlow 2.21, this machine): ``model.fit`` raises ValueError "as_list() is
not defined on an unknown TensorShape." (Keras 3; tf_keras says it inside "Exception
encountered when calling layer 'sequential'") ; with ``--fixed`` (``set_shape`` in the
map, as the guide does) the same program trains. ``tf_keras`` runs it with tf_keras.
"""

import sys

import numpy as np
import tensorflow as tf

if "tf_keras" in sys.argv:
    import tf_keras as keras
else:
    import keras

fixed = "--fixed" in sys.argv
rng = np.random.default_rng(0)
images = rng.uniform(size=(256, 28, 28)).astype("float32")
labels = rng.integers(0, 10, 256)


def random_noise(image):
    noisy = image + np.random.normal(0.0, 0.05, image.shape)
    return np.clip(noisy, 0.0, 1.0).astype("float32")


def tf_random_noise(image, label):
    im_shape = image.shape
    [image] = tf.numpy_function(random_noise, [image], [tf.float32])
    if fixed:
        image.set_shape(im_shape)
    return image, label


train_ds = tf.data.Dataset.from_tensor_slices((images, labels))
train_ds = train_ds.map(tf_random_noise)
train_ds = train_ds.batch(32)

model = keras.Sequential([
    keras.layers.Flatten(),
    keras.layers.Dense(128, activation="relu"),
    keras.layers.Dense(10),
])
model.compile(optimizer="adam",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
model.fit(train_ds, epochs=2)
