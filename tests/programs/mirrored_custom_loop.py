"""A user's MirroredStrategy custom training loop over devices it creates itself.

No GPU needed: the program splits the CPU into three logical devices and mirrors the model
over /cpu:1 and /cpu:2, with a tf.function step that returns the loss. Exit 0.
"""

import numpy as np
import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)

strategy = tf.distribute.MirroredStrategy(["/cpu:1", "/cpu:2"])
GLOBAL_BATCH = 64
rng = np.random.default_rng(1)
x = rng.standard_normal((4096, 16)).astype("float32")
y = (x[:, :4].argmax(axis=1)).astype("int64")
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(GLOBAL_BATCH)
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
        per_example = loss_object(labels, logits)
        loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
    return loss


@tf.function
def distributed_train_step(inputs):
    per_replica = strategy.run(train_step, args=(inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica, axis=None)


iterator = iter(dist_dataset)
for _ in range(40):
    loss = distributed_train_step(next(iterator))
print("final loss", round(float(loss), 4))
