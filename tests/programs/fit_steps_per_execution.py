"""A small Keras model fitted with the ``steps_per_execution`` the command line gives
(keras-io's "Customizing what happens in fit" style compile): a 32-64-4 MLP at batch 32,
small enough that TensorFlow's per-step work outweighs its ops on the CPU. Its last layer
gives logits, and the loss is told so (with the default from_logits=False the model read
its logits as probabilities and ended at ln 4, a model not learning: run.learning's fail).

    python fit_steps_per_execution.py N

Exit 0.
"""

import sys

import numpy as np
from tensorflow import keras

N = int(sys.argv[1]) if len(sys.argv) > 1 else 1
keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((4096, 32)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
model = keras.Sequential([keras.Input((32,)), keras.layers.Dense(64, activation="relu"),
                          keras.layers.Dense(4)])
model.compile(optimizer="sgd",
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              steps_per_execution=N)
model.fit(x, y, batch_size=32, epochs=3, verbose=0)
print("final loss", round(float(model.evaluate(x, y, verbose=0)), 4))
