"""keras-io's "Writing a training loop from scratch" fast version (``@tf.function`` on the
train step), with ``tf.config.run_functions_eagerly(True)`` left at the top, as programs in
the field leave it after debugging (tf.function's guide gives it as the way to step
through a function's Python). Every tf.function then runs its Python eagerly.

    python run_eagerly_left_on.py [off]

``off``: the guide's debugging pattern, turned off again before training. Exit 0.
"""

import sys

import numpy as np
import tensorflow as tf
from tensorflow import keras

# Ensure eager execution is enabled
tf.config.run_functions_eagerly(True)
if sys.argv[1:] == ["off"]:
    tf.config.run_functions_eagerly(False)

keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x_train = rng.standard_normal((1000, 784)).astype("float32")
y_train = (x_train[:, :10].argmax(axis=1)).astype("int64")
inputs = keras.Input(shape=(784,), name="digits")
x1 = keras.layers.Dense(64, activation="relu")(inputs)
outputs = keras.layers.Dense(10, name="predictions")(x1)
model = keras.Model(inputs=inputs, outputs=outputs)
optimizer = keras.optimizers.Adam(learning_rate=1e-3)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1024).batch(64)


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights, strict=True))
    return loss_value


for epoch in range(2):
    for x_batch, y_batch in train_dataset:
        loss_value = train_step(x_batch, y_batch)
    print(f"epoch {epoch}: loss {float(loss_value):.4f}")
