"""A user's Keras script whose model cannot learn: the learning rate is 0.

Trains a small classifier with Model.fit on one device; the loss stays at ln 10 and the
weights never move. Prints its own final loss. Exit 0.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.standard_normal((2048, 32)).astype("float32")
y = (x[:, :10].argmax(axis=1)).astype("int64")  # learnable, if anything learned

model = tf.keras.Sequential([
    tf.keras.Input((32,)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10, kernel_initializer="zeros", bias_initializer="zeros"),
])
model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=0.0),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(x, y, batch_size=64, epochs=2, verbose=2)
print("final loss", round(history.history["loss"][-1], 4))
