"""A user's Keras fit whose tf.data map is the kind of map that changes the advice.

``python augment_map_fit.py random``: an in-memory data set mapped every epoch, one
example at a time, by a function that does deterministic work (small matmuls) and random
augmentation (a Keras RandomFlip layer and tf.random noise): a .cache() after that map
would give every epoch the first epoch's flips and noise.
``python augment_map_fit.py pyfunc``: a map in parallel, prefetched, whose function is
Python run through tf.py_function (a pure-Python loop per example): the GIL runs it one
element at a time whatever num_parallel_calls says.
"""

import sys

import numpy as np
import tensorflow as tf

MODE = sys.argv[1]
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1536, 8, 8, 1)).astype("float32")
y = (x.reshape(1536, -1)[:, :4].argmax(axis=1)).astype("int64")
W = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)
flip = tf.keras.layers.RandomFlip("horizontal")


def augment(image, label):  # deterministic work, then random flips and noise
    m = tf.tile(tf.reshape(image[:2, :, 0], (1, 16)), (48, 3))
    for _ in range(100):
        m = tf.tanh(tf.matmul(m, W))
    image = flip(image + tf.reduce_mean(m) * 1e-3, training=True)
    return image + tf.random.uniform(tf.shape(image), maxval=0.01), label


def python_work(image):  # the program's own Python, per example
    total = 0
    for i in range(30000):
        total += i
    return image.numpy() + np.float32(total % 2)


def through_python(image, label):
    out = tf.py_function(python_work, [image], tf.float32)
    return tf.ensure_shape(out, image.shape), label


dataset = tf.data.Dataset.from_tensor_slices((x, y))
if MODE == "random":
    dataset = dataset.map(augment).batch(32)
else:
    dataset = dataset.map(through_python, num_parallel_calls=tf.data.AUTOTUNE).batch(
        32).prefetch(tf.data.AUTOTUNE)

model = tf.keras.Sequential([tf.keras.Input((8, 8, 1)), tf.keras.layers.Flatten(),
                             tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(dataset, epochs=2, verbose=0)  # 96 steps: profiled at 60-65, in the second epoch
print("done")
