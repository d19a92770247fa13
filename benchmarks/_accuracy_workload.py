"""The programs of benchmarks/try_accuracy.py, written the way users write them, each with
the fix `gpudiag try` applies edited in by hand behind ``fixed`` (its hand-fixed twin).

    python _accuracy_workload.py PROGRAM [fixed]

- ``wait``: a Keras fit fed by a per-example map whose work is waiting (a
  ``tf.numpy_function`` reading each example from storage: a 2 ms sleep, a file read's
  latency); fixed: ``num_parallel_calls=tf.data.AUTOTUNE`` on the map.
- ``compute``: the same fit, the map's work compute (80 small matmuls an example); fixed:
  the parallel map. (The benchmark runs it with a busy process on each core.)
- ``spe``: a 32-64-4 MLP at batch 32, ``steps_per_execution`` 1; fixed: 16.
- ``retrace``: a custom loop whose ``@tf.function`` step is given sequences of a new length
  each call (batched without padding to one length); fixed: ``reduce_retracing=True``.
- ``jit-matmul``: a fit already at ``steps_per_execution=16`` whose step is one large
  matmul (a 16-2048-4 MLP at batch 256); fixed: ``jit_compile=True`` in compile() (little
  for XLA to fuse).
- ``jit-fused``: the same at 16 steps a call, a model of many small element-wise ops
  (layer norms, GELUs, residual adds); fixed: ``jit_compile=True``.

Each prints its own clock's median step after its first 10 (``own step ms: X``): a fit's
batch hooks (per training step: a call of N steps counts N), a custom loop's own timing.
"""

import itertools
import statistics
import sys
import time

import numpy as np
import tensorflow as tf

PROGRAM = sys.argv[1]
FIXED = sys.argv[2:] == ["fixed"]
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)


class OwnClock(tf.keras.callbacks.Callback):
    """Each batch call's start and its step index: a call of N steps is N steps."""

    def __init__(self):
        super().__init__()
        self.starts = []

    def on_train_batch_begin(self, batch, logs=None):
        self.starts.append((batch, time.perf_counter()))

    def step_ms(self):
        steps = [(t1 - t0) / (b1 - b0) for (b0, t0), (b1, t1) in itertools.pairwise(self.starts)
                 if b1 > b0 and b0 >= 10]
        return statistics.median(steps) * 1e3 if steps else float("nan")  # stopped early


def read_example(i):  # the example read from storage: a file read's latency
    time.sleep(0.002)
    return np.full(16, i % 7, np.float32)


def load(i, label):
    features = tf.numpy_function(read_example, [i], tf.float32)
    features.set_shape([16])
    return features, label


W = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)


def augment(features, label):  # expensive per example: 80 small matmuls
    m = tf.tile(tf.reshape(features, (1, 16)), (48, 3))
    for _ in range(80):
        m = tf.tanh(tf.matmul(m, W))
    return features + tf.reduce_mean(m) * 1e-3, label


def mlp():
    return tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(64, activation="relu"),
                                tf.keras.layers.Dense(4)])


def fused():
    inputs = tf.keras.Input((16,))
    h = tf.keras.layers.Dense(64)(inputs)
    for _ in range(6):
        x = tf.keras.layers.LayerNormalization()(h)
        x = tf.keras.layers.Dense(64, activation="gelu")(x)
        h = h + x * 0.5
    return tf.keras.Model(inputs, tf.keras.layers.Dense(4)(h))


def fit_input(map_fn, n):
    x = rng.standard_normal((n, 16)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    if map_fn is load:
        dataset = tf.data.Dataset.from_tensor_slices((np.arange(n), y))
    else:
        dataset = tf.data.Dataset.from_tensor_slices((x, y))
    if FIXED:
        dataset = dataset.map(map_fn, num_parallel_calls=tf.data.AUTOTUNE).batch(16)
    else:
        dataset = dataset.map(map_fn).batch(16)
    model = mlp()
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    clock = OwnClock()
    model.fit(dataset, epochs=1, verbose=0, callbacks=[clock])
    return clock.step_ms()


def wide():
    return tf.keras.Sequential([tf.keras.Input((16,)),
                                tf.keras.layers.Dense(2048, activation="relu"),
                                tf.keras.layers.Dense(4)])


def fit_steps(model, n_steps, spe, jit, batch=32):
    x = rng.standard_normal((n_steps * batch, 16)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    if jit:
        model.compile(optimizer="sgd",
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=spe, jit_compile=True)
    else:
        model.compile(optimizer="sgd",
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      steps_per_execution=spe)
    clock = OwnClock()
    model.fit(x, y, batch_size=batch, epochs=2, verbose=0, callbacks=[clock])
    return clock.step_ms()


def retrace(n_steps):
    model = tf.keras.Sequential([tf.keras.Input((None, 16)), tf.keras.layers.Dense(32, "relu"),
                                 tf.keras.layers.GlobalAveragePooling1D(),
                                 tf.keras.layers.Dense(4)])
    optimizer = tf.keras.optimizers.SGD(0.05)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def step(x, y):
        with tf.GradientTape() as tape:
            loss = loss_fn(y, model(x, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    if FIXED:
        @tf.function(reduce_retracing=True)
        def train_step(x, y):
            return step(x, y)
    else:
        @tf.function
        def train_step(x, y):
            return step(x, y)
    times = []
    for i in range(n_steps):  # sentences of a new length each batch, not padded to one
        x = tf.constant(rng.standard_normal((8, 20 + i, 16)).astype("float32"))
        y = tf.constant(rng.integers(0, 4, 8))
        t0 = time.perf_counter()
        train_step(x, y)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[10:]) * 1e3


if PROGRAM == "wait":
    ms = fit_input(load, 16 * 70)
elif PROGRAM == "compute":
    ms = fit_input(augment, 16 * 70)
elif PROGRAM == "spe":
    ms = fit_steps(mlp(), 160, 16 if FIXED else 1, False)
elif PROGRAM == "retrace":
    ms = retrace(70)
elif PROGRAM == "jit-matmul":
    ms = fit_steps(wide(), 160, 16, FIXED, batch=256)
elif PROGRAM == "jit-fused":
    ms = fit_steps(fused(), 320, 16, FIXED)
else:
    sys.exit(f"unknown program {PROGRAM!r}")
print(f"own step ms: {ms:.4f}")
