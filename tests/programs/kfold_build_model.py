"""K-fold cross-validation that builds a new Keras model for every fold, as in the
threads that ask why memory grows and each fold gets slower (the tf.keras.backend
.clear_session docstring's own example: "creating many models in a loop ... this global
state will consume an increasing amount of memory over time"). ``build_model()`` is called
once per fold, with no ``clear_session()`` between folds.

    python kfold_build_model.py [clear | reuse] [folds=N]

``clear`` is the fix the threads give: ``tf.keras.backend.clear_session()`` before each
build (measured here, TF 2.21 / Keras 3: the same time and memory growth). ``reuse`` is
the fix that helps: the model built and compiled once, before the loop, its first weights
and optimizer variables restored each fold. The program prints each fold's time
(``fold s:``) and its resident memory after each fold (``rss MiB:``). Exit 0.
"""

import os
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

CLEAR = "clear" in sys.argv[1:]
REUSE = "reuse" in sys.argv[1:]
FOLDS = int(next((a[6:] for a in sys.argv[1:] if a.startswith("folds=")), "10"))
rng = np.random.default_rng(0)
x = rng.standard_normal((600, 20)).astype("float32")
y = (x[:, :3].sum(axis=1) > 0).astype("float32")


def build_model():
    model = tf.keras.Sequential([tf.keras.Input((20,))] + [
        tf.keras.layers.Dense(64, activation="relu") for _ in range(6)] + [
        tf.keras.layers.Dense(1, activation="sigmoid")])
    model.compile(optimizer="adam", loss="binary_crossentropy", metrics=["accuracy"])
    return model


if REUSE:
    model = build_model()
    model.optimizer.build(model.trainable_variables)
    initial = model.get_weights()
    opt_initial = [v.numpy() for v in model.optimizer.variables]
folds = np.array_split(np.arange(len(x)), FOLDS)
scores, times, rss = [], [], []
PAGE = os.sysconf("SC_PAGE_SIZE")
for val_idx in folds:
    t0 = time.perf_counter()
    if CLEAR:
        tf.keras.backend.clear_session()
    train_idx = np.setdiff1d(np.arange(len(x)), val_idx)
    if REUSE:  # built once (above, before the loop); each fold starts from the same weights
        model.set_weights(initial)
        for v, value in zip(model.optimizer.variables, opt_initial, strict=True):
            v.assign(value)
    else:
        model = build_model()
    model.fit(x[train_idx], y[train_idx], epochs=2, batch_size=64, verbose=0)
    scores.append(model.evaluate(x[val_idx], y[val_idx], verbose=0)[1])
    times.append(time.perf_counter() - t0)
    rss.append(int(Path("/proc/self/statm").read_text().split()[1]) * PAGE >> 20)
print("fold s:", " ".join(f"{t:.2f}" for t in times))
print("rss MiB:", " ".join(map(str, rss)))
print(f"mean accuracy {np.mean(scores):.3f}")
