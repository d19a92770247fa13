"""A user's first classifier, as asked about in forums: one sigmoid unit and
binary_crossentropy on digit labels 0-9 (issue 46). The loss goes negative and the accuracy
stays at chance; the fix is ten units, softmax and sparse categorical cross-entropy.

Tiny: 600 examples of 64 features, 3 epochs. Exit 0.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
templates = rng.uniform(size=(10, 64))
y_train = rng.integers(0, 10, 600)
x_train = np.clip(templates[y_train] + 0.2 * rng.normal(size=(600, 64)), 0, 1)

model = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation='relu', input_shape=(64,)),
    tf.keras.layers.Dense(1, activation='sigmoid')
])
model.compile(optimizer='adam', loss='binary_crossentropy', metrics=['accuracy'])
model.fit(x_train, y_train, epochs=3, batch_size=32)
