"""A user's MirroredStrategy custom loop where the all-reduce is a large share of the step:
a large dense layer (4M weights) and a small batch, over two devices the program makes
by splitting the CPU. The program times its loop and prints each step's period. Exit 0."""

import itertools
import json
import time

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
tf.keras.utils.set_random_seed(0)
strategy = tf.distribute.MirroredStrategy(["/cpu:1", "/cpu:2"])
GLOBAL_BATCH = 4
rng = np.random.default_rng(0)
x = rng.standard_normal((8, 2048)).astype("float32")  # two batches, learned by heart
y = (x[:, :4].argmax(axis=1)).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH).prefetch(2)
iterator = iter(strategy.experimental_distribute_dataset(dataset))

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((2048,)), tf.keras.layers.Dense(2048),
                                 tf.keras.layers.Dense(4)])
    optimizer = tf.keras.optimizers.SGD(0.002)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        loss = tf.nn.compute_average_loss(loss_object(labels, model(features, training=True)),
                                          global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def distributed_step(inputs):
    per_replica = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


starts = []
for _ in range(30):
    starts.append(time.perf_counter())
    loss = distributed_step(next(iterator))
print("own periods:", json.dumps([b - a for a, b in itertools.pairwise(starts)] + [None]))
print("final loss", round(float(loss), 4))
