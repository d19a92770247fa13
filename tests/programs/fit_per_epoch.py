"""A Keras model fitted one epoch at a time, the way notebooks do between looks at the
loss (three calls of fit on the same model)."""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 16)).astype("float32")
y = x[:, :4].argmax(axis=1)
model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
model.compile("adam", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
for epoch in range(3):
    history = model.fit(x, y, batch_size=8, epochs=1, verbose=0)
    print(f"epoch {epoch}: loss {history.history['loss'][-1]:.4f}")
