"""A tiny Keras fit (10 classes, learnable) with `keras`, or `tf_keras` (Keras 2) when
given as the argument: which one ran is printed, for the tests that put a copy of it on
PYTHONPATH (tests/e2e/test_run_usercode.py)."""

import importlib
import sys

import numpy as np

keras = importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else "keras")

print("keras from", keras.__file__)
keras.utils.set_random_seed(0)  # the same weights every run: the verdict is not a draw
rng = np.random.default_rng(0)
centers = rng.normal(size=(10, 16)).astype("float32") * 3
y = rng.integers(0, 10, 512)
x = centers[y] + rng.normal(size=(512, 16)).astype("float32")
model = keras.Sequential([keras.Input((16,)), keras.layers.Dense(32, activation="relu"),
                          keras.layers.Dense(10, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=4, verbose=0)
