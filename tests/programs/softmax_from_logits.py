"""A user's classifier, as asked about in forums: the last layer has a softmax, and the
loss, copied from the TensorFlow quickstart, says from_logits=True (issue 46): the
probabilities go through a softmax a second time. The fix: drop the last activation, or
from_logits=False.

Tiny: 512 examples of 32 features, 3 epochs. Exit 0.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x_train = rng.normal(size=(512, 32)).astype("float32")
y_train = x_train[:, :10].argmax(axis=1)

model = tf.keras.Sequential([
    tf.keras.layers.Dense(64, activation='relu', input_shape=(32,)),
    tf.keras.layers.Dense(10, activation='softmax')
])
model.compile(optimizer='adam',
              loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=['accuracy'])
model.fit(x_train, y_train, epochs=3, batch_size=32)
