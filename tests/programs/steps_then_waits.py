"""A custom loop that runs 30 steps, then waits for a file before it ends (a long job,
frozen at a moment the test chooses). With NAN_AT, its loss is NaN from that step on.

    python steps_then_waits.py GATE_FILE [NAN_AT]
"""

import sys
import time
from pathlib import Path

import tensorflow as tf

gate = Path(sys.argv[1])
nan_at = int(sys.argv[2]) if len(sys.argv) > 2 else None
w = tf.Variable(tf.ones([8, 1]))
x = tf.random.normal([16, 8])


@tf.function
def train_step(x, poison):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2) * poison
    w.assign_sub(1e-3 * tape.gradient(loss, w))
    return loss


for i in range(30):
    loss = train_step(x, float("nan") if nan_at is not None and i >= nan_at else 1.0)
print("waiting after 30 steps", flush=True)
deadline = time.monotonic() + 300  # a test that never opens the gate fails, not hangs
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
print("done", flush=True)
