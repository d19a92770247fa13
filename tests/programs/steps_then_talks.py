"""A custom loop that runs 30 steps, waits for a file, then talks for about two seconds:
whole lines on stdout, a few on stderr, and one line written in two parts 1.2 s apart (a
line a progress bar would leave open). What a status line must never tear.

    python steps_then_talks.py GATE_FILE
"""

import sys
import time
from pathlib import Path

import tensorflow as tf

gate = Path(sys.argv[1])
w = tf.Variable(tf.ones([8, 1]))
x = tf.random.normal([16, 8])


@tf.function
def train_step(x):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(1e-3 * tape.gradient(loss, w))
    return loss


for _ in range(30):
    train_step(x)
print("waiting after 30 steps", flush=True)
while not gate.exists():
    time.sleep(0.02)
for k in range(40):
    print(f"talk {k} " + "x" * 30, flush=True)
    if k % 8 == 0:
        print(f"err {k}", file=sys.stderr, flush=True)
    time.sleep(0.05)
print("half a line,", end="", flush=True)
time.sleep(1.2)
print(" then the rest", flush=True)
print("done", flush=True)
