"""TensorFlow's mixed precision guide (site/en/guide/mixed_precision.ipynb), its model as
written, run where the guide says it should not be: on a CPU.

Adapted only where no internet and no GPU force it: random data of MNIST's shapes (784
features, 10 classes) instead of keras.datasets.mnist, 2048 examples, batch 256 (the guide:
60000 and 8192), the guide's CPU width of 64 units, 2 epochs. ``float32`` as the first
argument is the twin without the policy.

Ground truth (TensorFlow 2.21, Keras 3.15, this project's 2-core CPU under the load of
other jobs, seconds per step of fit after a first epoch): float32 25 ms, mixed_float16
980-1060 ms (about 40x slower), mixed_bfloat16 49 ms (about 2x).
"""

import sys

import keras
import numpy as np
from keras import layers

policy = sys.argv[1] if len(sys.argv) > 1 else "mixed_float16"
if policy != "float32":
    keras.mixed_precision.set_global_policy(policy)

rng = np.random.default_rng(0)
x_train = rng.uniform(size=(2048, 784)).astype("float32")
y_train = rng.integers(0, 10, 2048)

inputs = keras.Input(shape=(784,), name="digits")
num_units = 64
dense1 = layers.Dense(num_units, activation="relu", name="dense_1")
x = dense1(inputs)
dense2 = layers.Dense(num_units, activation="relu", name="dense_2")
x = dense2(x)
x = layers.Dense(10, name="dense_logits")(x)
outputs = layers.Activation("softmax", dtype="float32", name="predictions")(x)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(loss="sparse_categorical_crossentropy",
              optimizer=keras.optimizers.RMSprop(),
              metrics=["accuracy"])
model.fit(x_train, y_train, batch_size=256, epochs=2, validation_split=0.2)
