"""A user's launcher that starts two worker processes, each importing TensorFlow.

The launcher itself never imports TensorFlow; each worker computes a little and exits.
"""

import subprocess
import sys

WORKER = ("import sys, tensorflow as tf\n"
          "print('worker', sys.argv[1], float(tf.reduce_sum(tf.ones([int(sys.argv[1]) + 2]))))\n")

for rank in range(2):
    subprocess.run([sys.executable, "-c", WORKER, str(rank)], check=True)
