"""A custom training loop that waits for a file between its two halves and before it ends
(a long job the test steps through: the dashboard must show its steps grow).

    python steps_gated.py GATE_1 GATE_2
"""

import sys
import time
from pathlib import Path

import tensorflow as tf

gates = [Path(p) for p in sys.argv[1:3]]
w = tf.Variable(tf.ones([8, 1]))
x = tf.random.normal([16, 8])


@tf.function
def train_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-3 * tape.gradient(loss, w))
    return loss


for gate in gates:
    for _ in range(20):
        loss = train_step(x)
    print(f"waiting for {gate.name}", flush=True)
    deadline = time.monotonic() + 300  # a test that never opens the gate fails, not hangs
    while not gate.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
print("done", flush=True)
