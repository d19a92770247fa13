"""A user's script that silences TensorFlow before importing it (a common habit)."""

import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"

import tensorflow as tf

print("sum", float(tf.reduce_sum(tf.ones([3, 3]))))
