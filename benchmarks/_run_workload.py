"""The user-like program benchmarks/run_overhead.py times, with and without gpudiag's hooks.

    python benchmarks/_run_workload.py fit|loop [--steps N]

``fit``: a Keras MLP trained with Model.fit (784-256-10, batch 128, generated data); a
first fit of WARMUP steps (tracing, and gpudiag's profiler window when hooked), then the
timed fit of N steps. ``loop``: the same model in a custom loop, a tf.function step that
returns its loss; WARMUP steps, then N timed steps ending with one read of the loss.
Prints ``STEP_S <seconds per step>`` last.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import tensorflow as tf

WARMUP = 40
BATCH = 128


def main() -> None:
    mode = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 400
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * 64, 784)).astype("float32")
    y = rng.integers(0, 10, BATCH * 64).astype("int64")
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    if mode == "fit":
        model.compile(optimizer=optimizer, loss=loss_fn, metrics=["accuracy"])
        data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(2)
        model.fit(data, epochs=1, steps_per_epoch=WARMUP, verbose=0)
        start = time.perf_counter()
        model.fit(data, epochs=1, steps_per_epoch=steps, verbose=0)
        elapsed = time.perf_counter() - start
    else:
        data = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)
                    .prefetch(2))

        @tf.function
        def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        for _ in range(WARMUP):
            loss = train_step(*next(data))
        float(loss)
        start = time.perf_counter()
        for _ in range(steps):
            loss = train_step(*next(data))
        float(loss)
        elapsed = time.perf_counter() - start
    print(f"STEP_S {elapsed / steps:.9f}", flush=True)


if __name__ == "__main__":
    main()
