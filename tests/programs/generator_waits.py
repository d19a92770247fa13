"""A custom loop fed by a Python generator (tf.data.Dataset.from_generator) that, at its
21st element, waits for a file to appear (a slow network share, a producer that died).

    python generator_waits.py GATE_FILE
"""

import sys
import time
from pathlib import Path

import tensorflow as tf

gate = Path(sys.argv[1])


def batches():
    for i in range(40):
        if i == 20:
            while not gate.exists():
                time.sleep(0.02)
        yield [[float(i)] * 4]


data = tf.data.Dataset.from_generator(
    batches, output_signature=tf.TensorSpec(shape=(1, 4), dtype=tf.float32))
w = tf.Variable(tf.ones([4, 1]))


@tf.function
def step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-3 * tape.gradient(loss, w))
    return loss


for x in data:
    loss = step(x)
print("done, loss", float(loss), flush=True)
