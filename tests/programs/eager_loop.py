"""A notebook-style training loop: small eager ops in a Python loop, no tf.function.

    python eager_loop.py STEPS
"""

import sys

import tensorflow as tf

x = tf.random.normal([64, 32])
y = tf.random.normal([64, 1])
w = tf.Variable(tf.zeros([32, 1]))
b = tf.Variable(0.0)
for _ in range(int(sys.argv[1])):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(tf.matmul(x, w) + b - y))
    dw, db = tape.gradient(loss, [w, b])
    w.assign_sub(0.01 * dw)
    b.assign_sub(0.01 * db)
print("final loss", float(loss), flush=True)
