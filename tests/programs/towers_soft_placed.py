"""A user's tf.compat.v1 multi-tower trainer, towers pinned to /gpu:0 and /gpu:1.

With allow_soft_placement (as the old tutorials set it) and no such GPUs, every tower is
silently placed on CPU:0, whatever its name scope says. Exit 0.
"""

import numpy as np
import tensorflow as tf

tf.compat.v1.disable_eager_execution()
rng = np.random.default_rng(2)
x_data = rng.standard_normal((512, 8)).astype("float32")
y_data = (x_data.sum(axis=1, keepdims=True) > 0).astype("float32")

x = tf.compat.v1.placeholder(tf.float32, [None, 8])
y = tf.compat.v1.placeholder(tf.float32, [None, 1])
with tf.device("/cpu:0"):
    w = tf.compat.v1.get_variable("w", [8, 1], initializer=tf.compat.v1.zeros_initializer())
    b = tf.compat.v1.get_variable("b", [1], initializer=tf.compat.v1.zeros_initializer())
opt = tf.compat.v1.train.GradientDescentOptimizer(0.5)
tower_grads, tower_losses = [], []
for i, (xs, ys) in enumerate(zip(tf.split(x, 2), tf.split(y, 2), strict=True)):
    with tf.device(f"/gpu:{i}"), tf.compat.v1.name_scope(f"tower_{i}"):
        logits = tf.matmul(xs, w) + b
        loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(labels=ys, logits=logits))
        tower_losses.append(loss)
        tower_grads.append(opt.compute_gradients(loss, [w, b]))
with tf.device("/cpu:0"):
    grads = [(tf.add_n([g[j][0] for g in tower_grads]) / 2.0, tower_grads[0][j][1])
             for j in range(2)]
    train_op = opt.apply_gradients(grads)
    total_loss = tf.add_n(tower_losses) / 2.0

config = tf.compat.v1.ConfigProto(allow_soft_placement=True)
with tf.compat.v1.Session(config=config) as sess:
    sess.run(tf.compat.v1.global_variables_initializer())
    for _ in range(30):
        _, value = sess.run([train_op, total_loss], feed_dict={x: x_data, y: y_data})
print("final loss", round(float(value), 4))
