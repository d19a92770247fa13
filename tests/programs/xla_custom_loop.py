"""keras-io's "Writing a training loop from scratch in TensorFlow"
(guides/writing_a_training_loop_from_scratch.py), its "Speeding-up your training step with
tf.function" section with XLA, as the guide's readers write it: the train step decorated
with @tf.function(jit_compile=True), called from a Python loop over a tf.data.Dataset.

Adapted only where no internet forces it: generated learnable data of MNIST's shapes (784
features, 10 classes: a template per class plus noise) instead of keras.datasets.mnist,
8192 examples, batch 64 (128 steps), 3 epochs; SGD's learning rate 1e-1 instead of 1e-3
(1e-3 does not move the loss off ln 10 in 384 steps).

``--prefetch`` is the twin with ``.prefetch(tf.data.AUTOTUNE)`` at the pipeline's end;
``--steps-per-call N`` the twin that gpudiag advises: an outer tf.function (no
jit_compile) running N steps over the iterator around the XLA-compiled step.
``--twins`` runs, after the training, rounds of one epoch of each (the loop as written,
with prefetch, 16 steps a call) in this one process, alternated so a shared machine's
load falls on all three alike, and prints each one's median step period over the rounds.
"""

import itertools
import sys
import time

import keras
import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
templates = rng.uniform(size=(10, 784))
y_train = rng.integers(0, 10, 8192)
x_train = np.clip(templates[y_train] + 0.3 * rng.normal(size=(8192, 784)), 0, 1)
x_train = x_train.astype("float32")

batch_size = 64
train_dataset = tf.data.Dataset.from_tensor_slices((x_train, y_train))
train_dataset = train_dataset.shuffle(buffer_size=1024).batch(batch_size)
if "--prefetch" in sys.argv:
    train_dataset = train_dataset.prefetch(tf.data.AUTOTUNE)

inputs = keras.Input(shape=(784,), name="digits")
x1 = keras.layers.Dense(64, activation="relu")(inputs)
x2 = keras.layers.Dense(64, activation="relu")(x1)
outputs = keras.layers.Dense(10, name="predictions")(x2)
model = keras.Model(inputs=inputs, outputs=outputs)

optimizer = keras.optimizers.SGD(learning_rate=1e-1)
loss_fn = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
train_acc_metric = keras.metrics.SparseCategoricalAccuracy()


@tf.function(jit_compile=True)
def train_step(x, y):
    with tf.GradientTape() as tape:
        logits = model(x, training=True)
        loss_value = loss_fn(y, logits)
    grads = tape.gradient(loss_value, model.trainable_weights)
    optimizer.apply_gradients(zip(grads, model.trainable_weights))  # noqa: B905 (the guide)
    train_acc_metric.update_state(y, logits)
    return loss_value


steps_per_call = int(sys.argv[sys.argv.index("--steps-per-call") + 1]) \
    if "--steps-per-call" in sys.argv else 1


@tf.function
def train_steps(iterator):
    for _ in tf.range(steps_per_call):
        x_batch_train, y_batch_train = next(iterator)
        loss_value = train_step(x_batch_train, y_batch_train)
    return loss_value


epochs = 3
start = time.perf_counter()
calls = []  # (epoch, the time each step call returned)
for epoch in range(epochs):
    if steps_per_call == 1:
        for step, (x_batch_train, y_batch_train) in enumerate(train_dataset):  # noqa: B007
            loss_value = train_step(x_batch_train, y_batch_train)
            calls.append((epoch, time.perf_counter()))
    else:
        iterator = iter(train_dataset)
        for _ in range(len(train_dataset) // steps_per_call):
            loss_value = train_steps(iterator)
            calls.append((epoch, time.perf_counter()))
    train_acc = train_acc_metric.result()
    train_acc_metric.reset_state()
# the steady state: the median period between calls after the first epoch (which
# compiles), a step (a call of N steps: its Nth)
periods = sorted(b - a for (e, a), (f, b) in itertools.pairwise(calls) if e == f and e > 0)
steady = periods[len(periods) // 2] / steps_per_call
print(f"loop {time.perf_counter() - start:.3f} s, steady {steady * 1e3:.3f} ms/step, "
      f"loss {float(loss_value):.4f}")

if "--twins" in sys.argv:
    prefetched = train_dataset.prefetch(tf.data.AUTOTUNE)
    steps_per_call = 16

    @tf.function
    def train_16(iterator):
        for _ in tf.range(16):
            x_batch_train, y_batch_train = next(iterator)
            loss_value = train_step(x_batch_train, y_batch_train)
        return loss_value

    def epoch_of(name):
        marks = [time.perf_counter()]
        if name == "steps16":
            iterator = iter(train_dataset)
            for _ in range(len(train_dataset) // 16):
                train_16(iterator)
                marks.append(time.perf_counter())
            n = 16
        else:
            for x_batch_train, y_batch_train in (prefetched if name == "prefetch"
                                                 else train_dataset):
                train_step(x_batch_train, y_batch_train)
                marks.append(time.perf_counter())
            n = 1
        return sorted((b - a) / n for a, b in itertools.pairwise(marks[1:]))

    periods = {"plain": [], "prefetch": [], "steps16": []}
    epoch_of("steps16")  # its trace, before the rounds
    for _ in range(4):
        for name, got in periods.items():
            got += epoch_of(name)
    print("twins " + " ".join(f"{name} {sorted(got)[len(got) // 2] * 1e3:.3f}"
                              for name, got in periods.items()), flush=True)
