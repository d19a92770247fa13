"""A user's Keras script that ends with the exit code it is given, after a fit that learns
(learning rate 0.1) or cannot (learning rate 0: the loss stays at ln 10).

    python keras_exit_code.py LEARNING_RATE EXIT_CODE
"""

import sys

import numpy as np
import tensorflow as tf

learning_rate, code = float(sys.argv[1]), int(sys.argv[2])
rng = np.random.default_rng(0)
x = rng.standard_normal((1024, 32)).astype("float32")
y = (x[:, :10].argmax(axis=1)).astype("int64")
tf.keras.utils.set_random_seed(0)
model = tf.keras.Sequential([
    tf.keras.Input((32,)),
    tf.keras.layers.Dense(64, activation="relu"),
    tf.keras.layers.Dense(10, kernel_initializer="zeros", bias_initializer="zeros"),
])
model.compile(optimizer=tf.keras.optimizers.SGD(learning_rate=learning_rate),
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
history = model.fit(x, y, batch_size=64, epochs=3, verbose=0)
print("final loss", round(history.history["loss"][-1], 4))
sys.exit(code)
