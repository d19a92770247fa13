"""A user's script that pins its model to a GPU that does not exist, soft placement off.

It crashes with TensorFlow's InvalidArgumentError in build_model(), exit 1.
"""

import tensorflow as tf

tf.config.set_soft_device_placement(False)


def build_model(x):
    with tf.device("/gpu:3"):
        return tf.matmul(x, x)


print(build_model(tf.ones([4, 4])))
