"""A user's digit classifier, as asked about in forums: integer labels 0-9 (as the datasets
give them) with loss='categorical_crossentropy', which takes one-hot rows (issue 46). Keras
stops at the first step on the shapes; the fix is sparse_categorical_crossentropy.

Tiny: 400 examples of 32 features, 2 epochs (it never gets past the first step).
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
y_train = rng.integers(0, 10, 400)
x_train = rng.uniform(size=(400, 32)).astype("float32")

model = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation='relu', input_shape=(32,)),
    tf.keras.layers.Dense(10, activation='softmax')
])
model.compile(optimizer='adam', loss='categorical_crossentropy', metrics=['accuracy'])
model.fit(x_train, y_train, epochs=2, batch_size=32)
