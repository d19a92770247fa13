"""Manual multi-GPU data parallelism as the TensorFlow GPU guide's "Manual placement" cell
writes it (one tower per GPU under tf.device, results combined on the CPU), in a training
step, with a classic mistake: the towers are pinned to '/gpu:0' and '/gpu:1' by name,
whatever the machine has. With soft placement on (TensorFlow 2's default) both towers run
on the CPU, and the name scopes still say tower_0 and tower_1.

Source: tensorflow/docs site/en/guide/gpu.ipynb ("Manual placement"), with the
GradientTape step of site/en/guide/basic_training_loops.ipynb
Adapted only where no GPU forces it: nothing but generated learnable data (16 features,
4 classes) and 30 steps; there is no GPU here, which is the point.
"""

import numpy as np
import tensorflow as tf

rng = np.random.default_rng(0)
x = rng.normal(size=(2048, 16)).astype("float32")
y = x[:, :4].argmax(axis=1)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(128)

model = tf.keras.Sequential([tf.keras.Input((16,)), tf.keras.layers.Dense(32, activation="relu"),
                             tf.keras.layers.Dense(4)])
optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)
loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)
towers = ['/gpu:0', '/gpu:1']


@tf.function
def train_step(images, labels):
    grads, losses = [], []
    for i, (xs, ys) in enumerate(zip(tf.split(images, len(towers)),
                                     tf.split(labels, len(towers)))):
        with tf.device(towers[i]), tf.name_scope('tower_%d' % i):
            with tf.GradientTape() as tape:
                loss = loss_fn(ys, model(xs, training=True))
            grads.append(tape.gradient(loss, model.trainable_variables))
            losses.append(loss)
    with tf.device('/CPU:0'):
        mean_grads = [tf.add_n(g) / len(towers) for g in zip(*grads)]
        optimizer.apply_gradients(zip(mean_grads, model.trainable_variables))
        return tf.add_n(losses) / len(towers)


for images, labels in dataset.take(30):
    loss = train_step(images, labels)
print("loss", float(loss))
