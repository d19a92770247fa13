"""A Keras fit fed by tf.data.Dataset.from_generator, as TensorFlow's tf.data guide writes
it ("Consuming Python generators": a generator of (features, label) pairs, an
output_signature, .batch, then model.fit), whose generator, at its 41st element, waits for
a file to appear (a slow network share, a producer that died).

    python fit_generator_waits.py GATE_FILE

Source: tensorflow/docs site/en/guide/data.ipynb, "Consuming Python generators" and
"Using tf.data with tf.keras". Adapted: generated features instead of the flowers
download; a gate file the test controls.

Ground truth: once 10 batches of 4 have been consumed the step waits for its input, and
the line that waits is the generator's `while not gate.exists():` loop (GEN_WAIT below),
on a thread TensorFlow owns; the main thread is inside `model.fit(...)`, which is not
where the step waits.
"""

import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

gate = Path(sys.argv[1])


def gen_examples():
    rng = np.random.default_rng(0)
    for i in range(2000):
        if i == 40:
            while not gate.exists():  # GEN_WAIT
                time.sleep(0.05)  # GEN_WAIT
        features = rng.standard_normal(8).astype("float32")
        yield features, np.float32(features.sum() > 0)


ds = tf.data.Dataset.from_generator(
    gen_examples,
    output_signature=(tf.TensorSpec(shape=(8,), dtype=tf.float32),
                      tf.TensorSpec(shape=(), dtype=tf.float32)))
ds = ds.batch(4)

model = tf.keras.Sequential([tf.keras.Input((8,)),
                             tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(1)])
model.compile(optimizer="adam",
              loss=tf.keras.losses.BinaryCrossentropy(from_logits=True))
model.fit(ds, epochs=1, steps_per_epoch=100, verbose=0)
print("done", flush=True)
