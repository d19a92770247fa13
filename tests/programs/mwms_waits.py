"""A MultiWorkerMirroredStrategy worker (TF_CONFIG from the environment, a custom loop)
that waits on a file the caller controls:

    python mwms_waits.py GATE before   worker 1 waits for GATE before its first step (the
                                       other worker's first all-reduce waits for it)
    python mwms_waits.py GATE after    every worker runs 5 steps, then waits for GATE

Each worker prints its final loss and exits 0 once GATE exists.
"""

import json
import os
import sys
import time
from pathlib import Path

import tensorflow as tf

gate, when = Path(sys.argv[1]), sys.argv[2]
strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]

with strategy.scope():
    w = tf.Variable(tf.ones([4, 1]))


@tf.function
def step(x):
    def replica(x):
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w) - 1.0))
        grad = tape.gradient(loss, w)
        grad = tf.distribute.get_replica_context().all_reduce("mean", grad)
        w.assign_sub(0.01 * grad)
        return loss

    return strategy.reduce("mean", strategy.run(replica, args=(x,)), axis=None)


def wait_for_gate():
    print(f"worker {index} waits for the gate", flush=True)
    while not gate.exists():
        time.sleep(0.05)


x = tf.ones([8, 4])
if when == "before" and index == 1:
    wait_for_gate()
for i in range(10):
    loss = step(x)
    if when == "after" and i == 4:
        wait_for_gate()
print(f"worker {index} final loss {float(loss):.4f}", flush=True)
