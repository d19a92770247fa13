"""A user's Keras fit whose labels are random: nothing in the inputs predicts them, so the
model cannot learn (its loss ends at ln 10, its accuracy at chance, 0.1). No seed is set:
every run starts from other weights, as a new user's script does. Exit 0."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng()
x = rng.standard_normal((2048, 32)).astype("float32")
y = rng.integers(0, 10, size=2048).astype("int64")
model = tf.keras.Sequential([tf.keras.Input((32,)),
                             tf.keras.layers.Dense(64, activation="relu"),
                             tf.keras.layers.Dense(10)])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(x, y, batch_size=64, epochs=3, verbose=0)
print("final loss", round(history.history["loss"][-1], 4),
      "accuracy", round(history.history["accuracy"][-1], 4))
