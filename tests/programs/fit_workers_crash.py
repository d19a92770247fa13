"""A Keras 2 era fit with a data-loading argument left in, as people write it after a
Sequence-based version of the program (`workers=-1, use_multiprocessing=True`), on arrays.

Ground truth (tf_keras 2.21 and Keras 3.15 on TensorFlow 2.21, this machine):
- ``tf_keras`` (the default): fit raises ValueError "Expected workers to be positive.
  Received is -1." before the first step; without workers/use_multiprocessing the same
  fit trains (``--fixed``);
- ``keras3``: ``import keras`` (Keras 3) raises TypeError "TensorFlowTrainer.fit() got an
  unexpected keyword argument 'workers'"; ``--fixed`` trains.
Exit code 1 on the crash (Python's own), 0 when fixed.
"""

import sys

import numpy as np

if "keras3" in sys.argv:
    import keras
else:
    import tf_keras as keras

fixed = "--fixed" in sys.argv
rng = np.random.default_rng(0)
x_train = rng.normal(size=(512, 32)).astype("float32")
y_train = (x_train[:, 0] > 0).astype("int64")

model = keras.Sequential([
    keras.Input(shape=(32,)),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dense(2, activation="softmax"),
])
model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
if fixed:
    model.fit(x_train, y_train, batch_size=64, epochs=2)
else:
    model.fit(x_train, y_train, batch_size=64, epochs=2, workers=-1, use_multiprocessing=True)
