"""A fit told to take more batches than its dataset holds, the way the questions about
"Your input ran out of data" show it: a dataset of 4 batches without .repeat(), and
steps_per_epoch=10 for 2 epochs: Keras takes the 4 batches each epoch (8 steps of the 20
asked) and warns.

    python fit_input_runs_out.py [repeat]

``repeat`` is the fix: .repeat() on the dataset, every step taken. Prints the steps fit
ran (``steps: <n>``). Exit 0.
"""

import sys

import numpy as np
import tensorflow as tf
from tensorflow import keras

keras.utils.set_random_seed(0)
x = np.random.rand(64, 4).astype("float32")
y = np.random.randint(0, 2, 64)
ds = tf.data.Dataset.from_tensor_slices((x, y)).batch(16)
if "repeat" in sys.argv[1:]:
    ds = ds.repeat()
model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(ds, epochs=2, steps_per_epoch=10, verbose=0)
print(f"steps: {int(model.optimizer.iterations.numpy())}")
