"""A 10-class MirroredStrategy custom loop (two logical CPU devices), in two modes:

- ``slow``: healthy but learning slowly (plain SGD at 1e-4 from large initial logits): the
  loss sits near 4.4, ln 86 give or take, and falls by less than 3 % over the run. No class
  count may be guessed from it (issue 19: "stuck at ln 86");
- ``stuck``: a learning rate of 0 and a zero-initialised output layer: the loss is ln 10
  from the first step to the last, which must still be caught, with the 10 classes read
  from the graph's cross-entropy op.
"""

import sys

import numpy as np
import tensorflow as tf

MODE = sys.argv[1]
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
GLOBAL_BATCH = 64
rng = np.random.default_rng(3)
centers = rng.normal(size=(10, 32)).astype("float32")
y = rng.integers(0, 10, 2048)
x = (centers[y] + rng.normal(size=(2048, 32))).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)
dist_dataset = strategy.experimental_distribute_dataset(dataset)

with strategy.scope():
    init = "zeros" if MODE == "stuck" else tf.keras.initializers.RandomNormal(stddev=0.35, seed=1)
    model = tf.keras.Sequential([tf.keras.Input((32,)),
                                 tf.keras.layers.Dense(10, kernel_initializer=init)])
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.0 if MODE == "stuck" else 1e-4)
    optimizer.build(model.trainable_variables)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True,
                                                                reduction="none")


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        per_example = loss_object(labels, model(features, training=True))
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def distributed_train_step(inputs):
    per_replica = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


iterator = iter(dist_dataset)
for step in range(40):
    loss = distributed_train_step(next(iterator))
    if step % 10 == 0:
        print(f"step {step}: loss {float(loss):.4f}")
