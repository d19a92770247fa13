"""A Keras 3 fit fed by a ``keras.utils.PyDataset``, written as Keras's own PyDataset
docstring and keras-io write one: a class over in-memory arrays whose ``__getitem__``
builds the batch in Python and NumPy, example by example (scale, pad and random crop,
a random flip, standardise), passed
straight to ``model.fit``.

    python pydataset_fit.py [--workers N [--multiprocessing]] [--tf-data]

Source: keras/src/trainers/data_adapters/py_dataset_adapter.py (the CIFAR10PyDataset
example of PyDataset's docstring); keras-io guides/training_with_built_in_methods.py
("Using a keras.utils.PyDataset object"). Adapted: generated images of CIFAR-10's 32x32x3 (no
download), a small model, 4 epochs of 64 batches of 32.

``--workers N`` gives the PyDataset N workers (threads; processes with
``--multiprocessing``);
``--tf-data`` is the twin with the same input as tf.data ops (from_tensor_slices, a map
doing the same per batch, prefetch). Each prints its steady time a step: the fastest
epoch after the first, over its batches. ``--twins`` then fits 3 rounds of one epoch of
each (this PyDataset, the tf.data twin, the PyDataset with 4 thread workers), alternated
in this one process so a shared machine's load falls on all alike, and prints each one's
median epoch a step.
"""

import math
import sys
import time

import keras
import numpy as np
import tensorflow as tf  # the tf.data twin only

rng = np.random.default_rng(0)
x_train = rng.integers(0, 256, size=(2048, 32, 32, 3), dtype=np.uint8)
y_train = (x_train.reshape(2048, -1).mean(axis=1) > 127.5).astype("float32")
batch_size = 32
workers = int(sys.argv[sys.argv.index("--workers") + 1]) if "--workers" in sys.argv else 1
multiprocessing = "--multiprocessing" in sys.argv


class ImagesPyDataset(keras.utils.PyDataset):
    def __init__(self, x_set, y_set, batch_size, **kwargs):
        super().__init__(**kwargs)
        self.x, self.y = x_set, y_set
        self.batch_size = batch_size

    def __len__(self):
        return math.ceil(len(self.x) / self.batch_size)

    def __getitem__(self, idx):
        low = idx * self.batch_size
        high = min(low + self.batch_size, len(self.x))
        images = []
        for image in self.x[low:high]:
            image = image.astype("float32") / 255.0
            image = np.pad(image, ((4, 4), (4, 4), (0, 0)), mode="reflect")
            top, left = np.random.randint(0, 9, size=2)
            image = image[top:top + 32, left:left + 32]
            if np.random.random() < 0.5:
                image = np.fliplr(image)
            image = (image - image.mean()) / (image.std() + 1e-6)
            images.append(image)
        return np.stack(images), self.y[low:high]



def augment(images, labels):
    images = tf.cast(images, tf.float32) / 255.0
    images = tf.pad(images, [[0, 0], [4, 4], [4, 4], [0, 0]], mode="REFLECT")
    images = tf.image.random_crop(images, [tf.shape(images)[0], 32, 32, 3])
    images = tf.image.random_flip_left_right(images)
    mean, var = tf.nn.moments(images, axes=[1, 2, 3], keepdims=True)
    return (images - mean) / (tf.sqrt(var) + 1e-6), labels


def tf_data():
    train = tf.data.Dataset.from_tensor_slices((x_train, y_train)).batch(batch_size)
    return train.map(augment).prefetch(tf.data.AUTOTUNE)


if "--tf-data" in sys.argv:
    train = tf_data()
else:
    train = ImagesPyDataset(x_train, y_train, batch_size, workers=workers,
                            use_multiprocessing=multiprocessing)

model = keras.Sequential([keras.Input((32, 32, 3)), keras.layers.Flatten(),
                          keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(1, activation="sigmoid")])
model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])


class EpochTimes(keras.callbacks.Callback):
    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        times.append(time.perf_counter() - self.t0)


times = []
if __name__ == "__main__":  # worker processes import this file (spawn) without training
    model.fit(train, epochs=4, verbose=0, callbacks=[EpochTimes()])
    steady = min(times[1:]) / len(x_train) * batch_size
    print(f"steady {steady * 1e3:.3f} ms/step", flush=True)
    if "--twins" in sys.argv:  # one epoch of each, alternated, in this one process
        twins = {"pydataset": train, "tf_data": tf_data(),
                 "threads4": ImagesPyDataset(x_train, y_train, batch_size, workers=4)}
        got = {name: [] for name in twins}
        for _ in range(3):
            for name, data in twins.items():
                times = []
                model.fit(data, epochs=1, verbose=0, callbacks=[EpochTimes()])
                got[name].append(times[0] / len(x_train) * batch_size)
        print("twins " + " ".join(f"{name} {sorted(t)[1] * 1e3:.3f}"
                                  for name, t in got.items()), flush=True)
