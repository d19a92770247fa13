"""keras-io's "Writing your own callbacks" made a training run: a callback of the
program's own that looks at the model's predictions on a few probe examples, the way the
guide's callbacks look at the logs, at every batch end (``model.predict`` each batch).

    python callback_predict.py [per-epoch]

``per-epoch`` is the fix: the same look in ``on_epoch_end``. The loss is told that the
model gives logits (read as probabilities, the loss stayed near 9.5 with the accuracy at
chance: a model not learning, run.learning's fail). The program times its own
batches (a callback of its own, begin to begin) and prints them (``own periods:``). Exit 0.
"""

import itertools
import json
import sys
import time

import numpy as np
from tensorflow import keras

PER_EPOCH = "per-epoch" in sys.argv[1:]
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_train = rng.standard_normal((1024, 784)).astype("float32")
y_train = (x_train[:, :10].argmax(axis=1)).astype("int64")
probe = x_train[:8]


def get_model():
    model = keras.Sequential([keras.Input((784,)), keras.layers.Dense(32), keras.layers.Dense(10)])
    model.compile(optimizer=keras.optimizers.RMSprop(learning_rate=0.1),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    return model


class ProbePredictions(keras.callbacks.Callback):
    """Watches the model's predictions on the probe examples."""

    def __init__(self):
        super().__init__()
        self.seen = []

    def on_train_batch_end(self, batch, logs=None):
        if not PER_EPOCH:
            self.seen.append(self.model.predict(probe, verbose=0).argmax(axis=1))

    def on_epoch_end(self, epoch, logs=None):
        if PER_EPOCH:
            self.seen.append(self.model.predict(probe, verbose=0).argmax(axis=1))


class OwnClock(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.starts = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append(time.perf_counter())


clock = OwnClock()
model = get_model()
model.fit(x_train, y_train, batch_size=64, epochs=2, verbose=0,
          callbacks=[ProbePredictions(), clock])
periods = [b - a for a, b in itertools.pairwise(clock.starts)]
print("own periods:", json.dumps([*periods, None]))
