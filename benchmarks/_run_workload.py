"""The user-like program benchmarks/run_overhead.py times, with and without gpudiag's hooks.

    python benchmarks/_run_workload.py fit|loop [--steps N]

``fit``: a Keras MLP trained with Model.fit (784-256-10, batch 128, generated data);
``loop``: the same model in a custom loop, a tf.function step that returns its loss.
WARMUP steps first (tracing, and gpudiag's profiler window when hooked), then N timed
steps in blocks of BLOCK: fit times them from batch start to batch start (its own small
callback, the same in both runs), the loop reads the loss at the end of each block.
Prints ``CPU_S <process CPU seconds per step>`` (over all timed steps: what the program
itself spent, whatever else the machine runs) and ``STEP_S <seconds per step>`` last: the
fastest block's wall time, so that another process taking the CPU for a moment (this
machine is shared) does not decide the result.
"""

from __future__ import annotations

import sys
import time

import numpy as np
import tensorflow as tf

WARMUP = 40
BATCH = 128
BLOCK = 50


def main() -> None:
    mode = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * 64, 784)).astype("float32")
    y = rng.integers(0, 10, BATCH * 64).astype("int64")
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(2)
    blocks: list[float] = []
    cpu_start = 0.0
    if mode == "fit":
        starts: list[float] = []
        cpu: list[float] = []

        class BatchStarts(tf.keras.callbacks.Callback):
            def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
                starts.append(time.perf_counter())
                if len(starts) == WARMUP + 1:
                    cpu.append(time.process_time())

        model.compile(optimizer=optimizer, loss=loss_fn, metrics=["accuracy"])
        model.fit(data, epochs=1, steps_per_epoch=WARMUP + steps + 1, verbose=0,
                  callbacks=[BatchStarts()])
        cpu_start = cpu[0]
        timed = starts[WARMUP:]
        blocks = [(timed[i + BLOCK] - timed[i]) / BLOCK
                  for i in range(0, len(timed) - BLOCK, BLOCK)]
    else:
        iterator = iter(data)

        @tf.function
        def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss

        for _ in range(WARMUP):
            loss = train_step(*next(iterator))
        float(loss)
        cpu_start = time.process_time()
        for _ in range(steps // BLOCK):
            start = time.perf_counter()
            for _ in range(BLOCK):
                loss = train_step(*next(iterator))
            float(loss)
            blocks.append((time.perf_counter() - start) / BLOCK)
    cpu_per_step = (time.process_time() - cpu_start) / steps
    print(f"CPU_S {cpu_per_step:.9f}")
    print(f"blocks of {BLOCK}: min {min(blocks) * 1e3:.3f} ms/step, median "
          f"{float(np.median(blocks)) * 1e3:.3f} ms/step")
    print(f"STEP_S {min(blocks):.9f}", flush=True)


if __name__ == "__main__":
    main()
