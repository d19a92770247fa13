"""A user's MultiWorkerMirroredStrategy training script: one worker of a cluster.

Written the way the TensorFlow tutorial writes it: TF_CONFIG comes from the environment
(the launcher, a scheduler or the user's shell sets it), the strategy is created first,
then a custom training loop with strategy.run inside a tf.function. Each worker prints
its final loss and exits 0. ``STEPS`` (environment, default 30) sets the steps.
"""

import json
import os

import numpy as np
import tensorflow as tf

strategy = tf.distribute.MultiWorkerMirroredStrategy()
task = json.loads(os.environ.get("TF_CONFIG", "{}")).get("task", {})
PER_WORKER_BATCH = 32
GLOBAL_BATCH = PER_WORKER_BATCH * strategy.num_replicas_in_sync
STEPS = int(os.environ.get("STEPS", "30"))

rng = np.random.default_rng(7)
x = rng.standard_normal((2048, 16)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(2048, seed=1).repeat()
dataset = dataset.batch(GLOBAL_BATCH)
dist_dataset = strategy.experimental_distribute_dataset(dataset)

with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((16,)),
                                 tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(
        from_logits=True, reduction=tf.keras.losses.Reduction.NONE)


def train_step(inputs):
    features, labels = inputs
    with tf.GradientTape() as tape:
        logits = model(features, training=True)
        loss = tf.nn.compute_average_loss(loss_object(labels, logits),
                                          global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def distributed_train_step(inputs):
    per_replica = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


iterator = iter(dist_dataset)
for _ in range(STEPS):
    loss = distributed_train_step(next(iterator))
print(f"worker {task.get('index')} final loss {float(loss):.4f}")
