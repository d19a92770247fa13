"""The user-like program benchmarks/run_overhead.py times, with and without gpudiag's hooks.

    python benchmarks/_run_workload.py fit|loop|eager|session|pyfunc|generator [--steps N]

``fit``: a Keras MLP trained with Model.fit (784-256-10, batch 128, generated data);
``loop``: the same model in a custom loop, a tf.function step that returns its loss;
``eager``: an eager-heavy loop, the way notebook code runs without tf.function: a small
linear model (32-1) updated with a GradientTape by a dozen small eager ops per step;
``session``: the MLP as a tf.compat.v1 graph run by ``Session.run`` per step;
``pyfunc``: the fit fed by a ``tf.py_function`` map (each example through the program's
Python, as a user's augmentation written in NumPy is); ``generator``: the fit fed by
``Dataset.from_generator`` (a Python generator yielding each example): input-bound
programs whose Python runs on tf.data's threads beside the step (issue 37: a py_function
fit took 1.40x longer under `gpudiag run` on a loaded machine).
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
from typing import Any

import numpy as np
import tensorflow as tf

WARMUP = 40
BATCH = 128
BLOCK = 50


def keras_train_step(model: Any, loss_fn: Any, optimizer: Any) -> Any:
    """The custom loop's step as users write it: a tf.function that returns its loss
    (benchmarks/_hook_cost_workload.py and _soak_workload.py use it too)."""

    @tf.function
    def train_step(features: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    return train_step


def eager_blocks(steps: int) -> tuple[list[float], float]:
    """Small eager ops in a Python loop: no tf.function, no Keras."""
    rng = np.random.default_rng(0)
    x = tf.constant(rng.standard_normal((64, 32)).astype("float32"))
    y = tf.constant(rng.standard_normal((64, 1)).astype("float32"))
    w = tf.Variable(tf.zeros((32, 1)))
    b = tf.Variable(0.0)

    def step() -> tf.Tensor:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
        dw, db = tape.gradient(loss, [w, b])
        w.assign_sub(0.01 * dw)
        b.assign_sub(0.01 * db)
        return loss

    for _ in range(WARMUP):
        step()
    cpu_start = time.process_time()
    blocks = []
    for _ in range(steps // BLOCK):
        start = time.perf_counter()
        for _ in range(BLOCK):
            loss = step()
        float(loss)
        blocks.append((time.perf_counter() - start) / BLOCK)
    return blocks, cpu_start


def session_blocks(steps: int) -> tuple[list[float], float]:
    """The MLP as a tf.compat.v1 graph, one Session.run per step."""
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    rng = np.random.default_rng(0)
    features = v1.placeholder(tf.float32, (BATCH, 784))
    labels = v1.placeholder(tf.int64, (BATCH,))
    w1 = v1.get_variable("w1", (784, 256))
    w2 = v1.get_variable("w2", (256, 10))
    hidden = tf.nn.relu(tf.matmul(features, w1))
    logits = tf.matmul(hidden, w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                          logits=logits))
    train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {features: rng.standard_normal((BATCH, 784)).astype("float32"),
            labels: rng.integers(0, 10, BATCH).astype("int64")}
    with v1.Session() as sess:
        sess.run(v1.global_variables_initializer())
        for _ in range(WARMUP):
            sess.run([train, loss], feed)
        cpu_start = time.process_time()
        blocks = []
        for _ in range(steps // BLOCK):
            start = time.perf_counter()
            for _ in range(BLOCK):
                sess.run([train, loss], feed)
            blocks.append((time.perf_counter() - start) / BLOCK)
    return blocks, cpu_start


def main() -> None:
    mode = sys.argv[1]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 1000
    if mode in ("eager", "session"):
        blocks, cpu_start = (eager_blocks if mode == "eager" else session_blocks)(steps)
        report(blocks, cpu_start, steps)
        return
    rng = np.random.default_rng(0)
    x = rng.standard_normal((BATCH * 64, 784)).astype("float32")
    y = rng.integers(0, 10, BATCH * 64).astype("int64")
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    data = input_data(mode, x, y)
    blocks: list[float] = []
    cpu_start = 0.0
    if mode in ("fit", "pyfunc", "generator"):
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

        train_step = keras_train_step(model, loss_fn, optimizer)

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
    report(blocks, cpu_start, steps)


def input_data(mode: str, x: np.ndarray, y: np.ndarray) -> Any:
    """The batches: in-memory slices, a py_function map over them, or a Python generator."""
    if mode == "generator":
        def examples() -> Any:
            while True:
                yield from zip(x, y, strict=True)

        data = tf.data.Dataset.from_generator(examples, output_signature=(
            tf.TensorSpec((784,), tf.float32), tf.TensorSpec((), tf.int64)))
        return data.batch(BATCH).prefetch(2)
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    if mode == "pyfunc":
        def scale(features: np.ndarray, label: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            return (np.asarray(features) * np.float32(0.5)).astype("float32"), label

        def mapped(features: tf.Tensor, label: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
            out, lab = tf.py_function(scale, [features, label], [tf.float32, tf.int64])
            out.set_shape((784,))
            lab.set_shape(())
            return out, lab

        data = data.map(mapped)
    return data.batch(BATCH).prefetch(2)


def report(blocks: list[float], cpu_start: float, steps: int) -> None:
    cpu_per_step = (time.process_time() - cpu_start) / steps
    print(f"CPU_S {cpu_per_step:.9f}")
    print(f"blocks of {BLOCK}: min {min(blocks) * 1e3:.3f} ms/step, median "
          f"{float(np.median(blocks)) * 1e3:.3f} ms/step")
    print(f"STEP_S {min(blocks):.9f}", flush=True)


if __name__ == "__main__":
    main()
