"""The program benchmarks/hook_cost.py runs under `gpudiag run`: the same steps, in one
process, through gpudiag's hook and through TensorFlow's own entry point.

    python benchmarks/_hook_cost_workload.py loop|session|fit [--rounds 30] [--block 100]

gpudiag wraps a few entry points of the program (``Function.__call__`` for a tf.function
step, ``Session.run``, ``Model.fit``) and keeps TensorFlow's own function beside each
wrapper as ``__gpudiag_wrapped__``. After a warm-up (through the hook, so that gpudiag's
placement and profiler windows are over), each round times three blocks of ``--block``
steps of the same compiled step: through the hook, and twice through TensorFlow's own
entry point (the order rotates each round; fit's blocks are one fit call each, timed from
its first batch's start to its last's by a callback of the program's own, on both sides,
so that what fit and gpudiag do once a call is left out). Prints
``ROUND <hooked> <plain> <plain2>`` in seconds per step, one line a round. The model and
data are benchmarks/_run_workload.py's (a 784-256-10 MLP at batch 128, generated data).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from _run_workload import keras_train_step

BATCH = 128
WARMUP = 60
ORDERS = (("hooked", "plain", "plain2"), ("plain", "hooked", "plain2"),
          ("plain", "plain2", "hooked"))


def original(attr: Any) -> Any:
    """TensorFlow's own function behind gpudiag's wrapper."""
    inner = getattr(attr, "__gpudiag_wrapped__", None)
    if inner is None:
        sys.exit("not under `gpudiag run`: no gpudiag wrapper to compare with")
    return inner


def mlp_data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return (rng.standard_normal((BATCH * 64, 784)).astype("float32"),
            rng.integers(0, 10, BATCH * 64).astype("int64"))


def loop_steps() -> dict[str, Callable[[int], float | None]]:
    x, y = mlp_data()
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    optimizer = tf.keras.optimizers.SGD(0.01)
    iterator = iter(tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH)
                    .prefetch(2))

    train_step = keras_train_step(model, loss_fn, optimizer)

    own_call = original(type(train_step).__call__)

    def hooked(n: int) -> None:
        for _ in range(n):
            loss = train_step(*next(iterator))
        float(loss)

    def plain(n: int) -> None:
        for _ in range(n):
            loss = own_call(train_step, *next(iterator))
        float(loss)

    hooked(WARMUP)
    return {"hooked": hooked, "plain": plain}


def session_steps() -> dict[str, Callable[[int], float | None]]:
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    x, y = mlp_data()
    features = v1.placeholder(tf.float32, (BATCH, 784))
    labels = v1.placeholder(tf.int64, (BATCH,))
    w1 = v1.get_variable("w1", (784, 256))
    w2 = v1.get_variable("w2", (256, 10))
    logits = tf.matmul(tf.nn.relu(tf.matmul(features, w1)), w2)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                          logits=logits))
    train = v1.train.GradientDescentOptimizer(0.01).minimize(loss)
    feed = {features: x[:BATCH], labels: y[:BATCH]}
    sess = v1.Session()
    sess.run(v1.global_variables_initializer())
    own_run = original(type(sess).run)

    def hooked(n: int) -> None:
        for _ in range(n):
            sess.run([train, loss], feed)

    def plain(n: int) -> None:
        for _ in range(n):
            own_run(sess, [train, loss], feed)

    hooked(WARMUP)
    return {"hooked": hooked, "plain": plain}


def fit_steps() -> dict[str, Callable[[int], float | None]]:
    x, y = mlp_data()
    model = tf.keras.Sequential([tf.keras.Input((784,)),
                                 tf.keras.layers.Dense(256, activation="relu"),
                                 tf.keras.layers.Dense(10)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01),
                  loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  metrics=["accuracy"])
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(BATCH).prefetch(2)
    own_fit = original(type(model).fit)
    starts: list[float] = []

    class BatchStarts(tf.keras.callbacks.Callback):  # the program's own clock, both sides
        def on_train_batch_begin(self, batch: int, logs: object = None) -> None:
            starts.append(time.perf_counter())

    def timed(fit: Callable[..., Any], n: int) -> float:
        """Seconds per step from the first batch's start to the last's (fit's own setup,
        and gpudiag's at fit's start and end, once a fit call, left out)."""
        starts.clear()
        fit(data, epochs=1, steps_per_epoch=n + 1, verbose=0, callbacks=[BatchStarts()])
        return (starts[-1] - starts[0]) / n

    def hooked(n: int) -> float:
        return timed(model.fit, n)

    def plain(n: int) -> float:
        return timed(lambda *a, **k: own_fit(model, *a, **k), n)

    hooked(WARMUP)
    return {"hooked": hooked, "plain": plain}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=("loop", "session", "fit"))
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=100)
    args = parser.parse_args()
    steps = {"loop": loop_steps, "session": session_steps, "fit": fit_steps}[args.mode]()
    runs = {"hooked": steps["hooked"], "plain": steps["plain"], "plain2": steps["plain"]}
    for r in range(args.rounds):
        took = {}
        for side in ORDERS[r % len(ORDERS)]:
            start = time.perf_counter()
            own = runs[side](args.block)  # fit times its steps itself
            took[side] = own if own is not None else \
                (time.perf_counter() - start) / args.block
        print(f"ROUND {took['hooked']:.9f} {took['plain']:.9f} {took['plain2']:.9f}",
              flush=True)


if __name__ == "__main__":
    main()
