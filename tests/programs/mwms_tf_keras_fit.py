"""The "Multi-worker training with Keras" tutorial's fit under tf_keras, two workers on one
machine (issue 46's held-out case): tf_keras reports each batch's loss summed over the 2
replicas (2 x ln 10 at the start), its epochs' loss per replica.

Source: tensorflow/docs site/en/tutorials/distribute/multi_worker_with_keras.ipynb
Adapted only where no internet and one machine force it: generated learnable data of
MNIST's shapes instead of the downloaded set; the two workers started by this file itself
(run without TF_CONFIG it starts two copies of itself, each with its TF_CONFIG, and exits
with the first non-zero code); 2 epochs of the tutorial's 70 steps, not 3. Exit 0.
"""

import json
import os
import socket
import subprocess
import sys

if "TF_CONFIG" not in os.environ:  # the launcher: never imports TensorFlow
    def free_port():
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]

    workers = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    configs = [{"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}}
               for i in range(2)]
    procs = [subprocess.Popen([sys.executable, __file__],
                              env={**os.environ, "TF_CONFIG": json.dumps(c)}) for c in configs]
    codes = [p.wait() for p in procs]
    sys.exit(next((c for c in codes if c), 0))

os.environ["TF_USE_LEGACY_KERAS"] = "1"  # tf.keras is tf_keras (Keras 2)
import numpy as np
import tensorflow as tf

per_worker_batch_size = 64
strategy = tf.distribute.MultiWorkerMirroredStrategy()
global_batch_size = per_worker_batch_size * strategy.num_replicas_in_sync

rng = np.random.default_rng(0)
templates = rng.uniform(size=(10, 28, 28)).astype("float32")
y_train = rng.integers(0, 10, 4096)
x_train = np.clip(templates[y_train] + 0.3 * rng.normal(size=(4096, 28, 28)), 0, 1)
dataset = tf.data.Dataset.from_tensor_slices(
    (x_train.astype("float32"), y_train)).shuffle(4096).repeat().batch(global_batch_size)

with strategy.scope():
    multi_worker_model = tf.keras.Sequential([
        tf.keras.layers.InputLayer(input_shape=(28, 28)),
        tf.keras.layers.Reshape(target_shape=(28, 28, 1)),
        tf.keras.layers.Conv2D(32, 3, activation='relu'),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(128, activation='relu'),
        tf.keras.layers.Dense(10)
    ])
    multi_worker_model.compile(
        loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        optimizer=tf.keras.optimizers.SGD(learning_rate=0.001),
        metrics=['accuracy'])

multi_worker_model.fit(dataset, epochs=2, steps_per_epoch=70, verbose=2)
