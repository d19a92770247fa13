"""A Keras fit profiled the way the TensorBoard guide shows: the program's own
``tf.keras.callbacks.TensorBoard(log_dir, profile_batch=(3, 7))`` writes the trace that
`gpudiag explain` then reads.

    python keras_tensorboard_profile.py LOGDIR
"""

import sys

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 20)).astype("float32")
y = rng.integers(0, 3, 1024)

model = tf.keras.Sequential([
    tf.keras.Input((20,)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(3),
])
model.compile(optimizer="adam",
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
tensorboard = tf.keras.callbacks.TensorBoard(log_dir=sys.argv[1], profile_batch=(3, 7))
model.fit(x, y, batch_size=32, epochs=1, verbose=0, callbacks=[tensorboard])
