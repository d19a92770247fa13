"""A program that handles Python warnings itself: its own warnings.showwarning, then a
catch_warnings(record=True) block, each around Keras's real from_logits-on-softmax
UserWarning. gpudiag's hooks record the warning without changing what the program sees:
tests/e2e/test_run_pywarnings.py runs it with and without them and compares the output."""

import warnings

import keras
import tensorflow as tf

warnings.simplefilter("always")


def mine(message, category, filename, lineno, file=None, line=None):
    print(f"MINE {category.__name__}: {str(message)[:60]}")


model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(3, activation="softmax")])
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)


@tf.function
def loss_of(x, y):
    return loss_fn(y, model(x))


warnings.showwarning = mine
loss_of(tf.ones([2, 4]), tf.zeros([2], tf.int32))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    loss_of(tf.ones([3, 4]), tf.zeros([3], tf.int32))  # a new shape: traced again, warns
print("caught", len(caught), caught[0].category.__name__ if caught else None)
