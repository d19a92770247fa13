"""The slow and fixed programs of benchmarks/whatif.py, as TensorFlow's guides write them.
Each fixed program is the fix the slow one's bottleneck finding advises, nothing more.

    python _whatif_workload.py map slow|fixed   Keras fit fed by a tf.data map that costs
                                                (the tf.data performance guide): one
                                                element at a time, no prefetch; then
                                                num_parallel_calls=AUTOTUNE + prefetch
    python _whatif_workload.py gen slow|fixed   a Python generator making each example
                                                (Dataset.from_generator); then the same
                                                examples made at once (vectorised NumPy),
                                                from_tensor_slices + prefetch
    python _whatif_workload.py spe N            Keras fit of a small model (keras-io's
                                                "Customizing what happens in fit": small
                                                models gain from steps_per_execution)
    python _whatif_workload.py eager|graph      a custom training step (the tf.function
                                                guide: the same step eager, then under
                                                tf.function); it prints its own step times
    python _whatif_workload.py mirrored B       MirroredStrategy over two virtual CPU
                                                devices, a 4M-weight Dense layer: the
                                                all-reduce dominates at global batch B
"""

import itertools
import json
import sys
import time

import numpy as np
import tensorflow as tf

MODE, ARG = sys.argv[1], (sys.argv[2] if len(sys.argv) > 2 else "")
if MODE == "mirrored":
    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)


def small_model():
    return tf.keras.Sequential([tf.keras.Input((16,)),
                                tf.keras.layers.Dense(32, activation="relu"),
                                tf.keras.layers.Dense(4)])


loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)


def map_fit():
    x = rng.standard_normal((6144, 16)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    w = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)

    def augment(features, label):  # expensive per example: 30 small matmuls
        m = tf.tile(tf.reshape(features, (1, 16)), (48, 3))
        for _ in range(30):
            m = tf.tanh(tf.matmul(m, w))
        return features + tf.reduce_mean(m) * 1e-3, label

    data = tf.data.Dataset.from_tensor_slices((x, y))
    if ARG == "fixed":
        data = data.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32).prefetch(
            tf.data.AUTOTUNE)
    else:
        data = data.map(augment).batch(32)
    model = small_model()
    model.compile("sgd", loss_fn)
    model.fit(data, epochs=1, verbose=0)


def features_of(raw):  # the per-example work: a few nonlinear features of 16 numbers
    out = raw
    for _ in range(20):
        out = np.tanh(out * 1.1 + 0.1)
    return out.astype("float32")


def gen_fit():
    raw = rng.standard_normal((4096, 16))
    y = (raw[:, :4].argmax(axis=1)).astype("int64")
    if ARG == "fixed":
        data = tf.data.Dataset.from_tensor_slices((features_of(raw), y)).batch(32).prefetch(
            tf.data.AUTOTUNE)
    else:
        def examples():
            for row, label in zip(raw, y, strict=True):
                yield features_of(row), label

        data = tf.data.Dataset.from_generator(examples, output_signature=(
            tf.TensorSpec((16,), tf.float32), tf.TensorSpec((), tf.int64))).batch(32)
    model = small_model()
    model.compile("sgd", loss_fn)
    model.fit(data, epochs=1, verbose=0)


def spe_fit():
    x = rng.standard_normal((16384, 16)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    model = small_model()
    model.compile("sgd", loss_fn, steps_per_execution=int(ARG))
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)


def custom_loop():
    x = rng.standard_normal((4096, 16)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    model = small_model()
    optimizer = tf.keras.optimizers.SGD(0.01)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(32).repeat(2)

    def train_step(features, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(features, training=True))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    step = tf.function(train_step) if MODE == "graph" else train_step
    starts = []
    for features, labels in data:
        starts.append(time.perf_counter())
        step(features, labels)
    print("own periods:", json.dumps([b - a for a, b in itertools.pairwise(starts)]))


def mirrored():
    batch = int(ARG)
    strategy = tf.distribute.MirroredStrategy(["/cpu:1", "/cpu:2"])
    x = rng.standard_normal((64, 2048)).astype("float32")
    y = (x[:, :4].argmax(axis=1)).astype("int64")
    data = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch).prefetch(2)
    iterator = iter(strategy.experimental_distribute_dataset(data))
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((2048,)), tf.keras.layers.Dense(2048),
                                     tf.keras.layers.Dense(4)])
        optimizer = tf.keras.optimizers.SGD(0.002)
        loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
            from_logits=True, reduction=tf.keras.losses.Reduction.NONE)

    def train_step(inputs):
        features, labels = inputs
        with tf.GradientTape() as tape:
            loss = tf.nn.compute_average_loss(
                loss_object(labels, model(features, training=True)), global_batch_size=batch)
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
        return loss

    @tf.function
    def distributed_step(inputs):
        per_replica = strategy.run(train_step, args=(inputs,))
        return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)

    for _ in range(60):
        distributed_step(next(iterator))


{"map": map_fit, "gen": gen_fit, "spe": spe_fit, "eager": custom_loop,
 "graph": custom_loop, "mirrored": mirrored}[MODE]()
