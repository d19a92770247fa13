"""The TensorFlow GPU guide's "Using a single GPU on a multi-GPU system", as written: ops
pinned to /device:GPU:2 with soft placement on, so that TensorFlow "automatically chooses
an existing and supported device" when the one asked for does not exist.

Source: tensorflow/docs site/en/guide/gpu.ipynb
Adapted only where no GPU forces it: nothing (the guide's cells in order, the placement log
the guide turns on); on this machine there is no GPU at all, so GPU:2 is missing and the
ops run on CPU:0 without a word.
"""

import tensorflow as tf

tf.config.set_soft_device_placement(True)
tf.debugging.set_log_device_placement(True)

# Specify an invalid GPU device
with tf.device('/device:GPU:2'):
    a = tf.constant([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    b = tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    c = tf.matmul(a, b)

print(c)
