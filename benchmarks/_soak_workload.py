"""The long job benchmarks/soak.py runs: a custom loop for a given time.

    python benchmarks/_soak_workload.py SECONDS

A small MLP (64-64-10, batch 32) trained by a tf.function step that returns its loss,
plus a few eager ops per step (a running mean of the loss, the way notebook code keeps
one): fast steps, so that an hour of it is hundreds of thousands of steps, what stresses
gpudiag's per-step records. Prints ``STEPS <n>``, ``STEP_S <median of 50-step blocks>``
and, as the very last thing before it exits, ``END_UNIX <time.time()>``.
"""

from __future__ import annotations

import statistics
import sys
import time

import numpy as np
import tensorflow as tf
from _run_workload import keras_train_step

BLOCK = 50


def main() -> None:
    seconds = float(sys.argv[1])
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32 * 64, 64)).astype("float32")
    y = rng.integers(0, 10, 32 * 64).astype("int64")
    model = tf.keras.Sequential([tf.keras.Input((64,)),
                                 tf.keras.layers.Dense(64, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    iterator = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32).prefetch(2))

    train_step = keras_train_step(model, loss_fn, optimizer)

    running = tf.Variable(0.0)
    blocks: list[float] = []
    steps = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        for _ in range(BLOCK):
            loss = train_step(*next(iterator))
            running.assign(0.99 * running + 0.01 * loss)  # eager ops
        float(running)
        blocks.append((time.perf_counter() - start) / BLOCK)
        steps += BLOCK
    print(f"STEPS {steps}")
    print(f"STEP_S {statistics.median(blocks[2:] or blocks):.9f}")
    print(f"END_UNIX {time.time():.6f}", flush=True)


if __name__ == "__main__":
    main()
