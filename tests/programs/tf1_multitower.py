"""TF1 multi-GPU towers as tensorflow/models' CIFAR-10 trainer writes them
(tutorials/image/cifar10/cifar10_multi_gpu_train.py and cifar10.py: variables made with
tf.get_variable under variable scopes conv1/local3/softmax_linear, each variable pinned to
/cpu:0 by cifar10.py's `_variable_on_cpu`, one tower per GPU under
`tf.name_scope('tower_%d')`, `tf.get_variable_scope().reuse_variables()` after the first
tower, the towers' gradients averaged, an ExponentialMovingAverage of the trainable
variables, `allow_soft_placement=True`).

    python tf1_multitower.py [--variant=ok|no_scope_wrapper|no_reuse|contrib]

Adapted: TF 2.21 through tf.compat.v1 (eager off); 8x8 generated images fed through a
placeholder instead of CIFAR-10's queue (its `tf.contrib.slim.prefetch_queue` exists only
in TF 1.x: `--variant=contrib` keeps that line); 2 towers; 20 steps. The towers stay on
'/gpu:%d' with soft placement, as written: here they run on the CPU.

Ground truth per variant (what TensorFlow 2.21 raises, captured here):
- ok: trains 20 steps. What it builds: in-graph replication, 2 towers, tower_0's ops pinned
  to /device:GPU:0 and tower_1's to /device:GPU:1 (each tower's `opt.compute_gradients`
  with its loss on that device), the towers' gradients averaged (`average_gradients`:
  a Mean per variable over both towers) and applied once by `opt.apply_gradients` to the
  6 variables, which live on /cpu:0. On this machine (no GPU, no virtual device: the
  towers are left on '/gpu:%d' as written) soft placement runs both towers on
  /device:CPU:0: gpudiag's run.soft-placement fails on it, rightly.
- no_scope_wrapper: the tower loop without its `with tf.variable_scope(
  tf.get_variable_scope()):` wrapper: reuse_variables() sets reuse on the root scope, so
  the ExponentialMovingAverage built after the loop cannot create its shadow variables:
  "ValueError: Variable conv1/weights/ExponentialMovingAverage/ does not exist, or was
  not created with tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE in
  VarScope?" (tensorflow/models#901). The fix is the wrapper, not AUTO_REUSE.
- no_reuse: without reuse_variables() the second tower creates conv1/weights again:
  "ValueError: Variable conv1/weights already exists, disallowed. Did you mean to set
  reuse=True or reuse=tf.AUTO_REUSE in VarScope?"
- contrib: "AttributeError: module 'tensorflow.compat.v1' has no attribute 'contrib'"
  (TF 2 has no tf.contrib).
"""

# The trainer's code as it is written (its % formats):
# ruff: noqa: UP031, RET504, B905, SIM117, F841, B007

import argparse

import numpy as np
import tensorflow.compat.v1 as tf

NUM_GPUS = 2
TOWER_NAME = "tower"
MOVING_AVERAGE_DECAY = 0.9999


def _variable_on_cpu(name, shape, initializer):
    with tf.device("/cpu:0"):
        var = tf.get_variable(name, shape, initializer=initializer)
    return var


def _variable_with_weight_decay(name, shape, stddev, wd):
    var = _variable_on_cpu(name, shape, tf.truncated_normal_initializer(stddev=stddev))
    if wd is not None:
        weight_decay = tf.multiply(tf.nn.l2_loss(var), wd, name="weight_loss")
        tf.add_to_collection("losses", weight_decay)
    return var


def inference(images):
    with tf.variable_scope("conv1") as scope:
        kernel = _variable_with_weight_decay("weights", shape=[3, 3, 3, 8], stddev=5e-2,
                                             wd=None)
        conv = tf.nn.conv2d(images, kernel, [1, 1, 1, 1], padding="SAME")
        biases = _variable_on_cpu("biases", [8], tf.constant_initializer(0.0))
        conv1 = tf.nn.relu(tf.nn.bias_add(conv, biases), name=scope.name)
    with tf.variable_scope("local3") as scope:
        reshape = tf.reshape(conv1, [-1, 8 * 8 * 8])
        weights = _variable_with_weight_decay("weights", shape=[8 * 8 * 8, 16],
                                              stddev=0.04, wd=0.004)
        biases = _variable_on_cpu("biases", [16], tf.constant_initializer(0.1))
        local3 = tf.nn.relu(tf.matmul(reshape, weights) + biases, name=scope.name)
    with tf.variable_scope("softmax_linear") as scope:
        weights = _variable_with_weight_decay("weights", [16, 10], stddev=1 / 16.0, wd=None)
        biases = _variable_on_cpu("biases", [10], tf.constant_initializer(0.0))
        softmax_linear = tf.add(tf.matmul(local3, weights), biases, name=scope.name)
    return softmax_linear


def tower_loss(scope, images, labels):
    logits = inference(images)
    cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(
        labels=labels, logits=logits, name="cross_entropy_per_example")
    tf.add_to_collection("losses", tf.reduce_mean(cross_entropy, name="cross_entropy"))
    losses = tf.get_collection("losses", scope)
    return tf.add_n(losses, name="total_loss")


def average_gradients(tower_grads):
    average_grads = []
    for grad_and_vars in zip(*tower_grads):
        grads = [tf.expand_dims(g, 0) for g, _ in grad_and_vars]
        grad = tf.reduce_mean(tf.concat(axis=0, values=grads), 0)
        average_grads.append((grad, grad_and_vars[0][1]))
    return average_grads


def build_towers(opt, batches, reuse):
    tower_grads = []
    for i in range(NUM_GPUS):
        with tf.device("/gpu:%d" % i):
            with tf.name_scope("%s_%d" % (TOWER_NAME, i)) as scope:
                image_batch, label_batch = batches[i]
                loss = tower_loss(scope, image_batch, label_batch)
                if reuse:
                    # Reuse variables for the next tower.
                    tf.get_variable_scope().reuse_variables()
                grads = opt.compute_gradients(loss)
                tower_grads.append(grads)
    return loss, tower_grads


def train(variant):
    with tf.Graph().as_default(), tf.device("/cpu:0"):
        global_step = tf.get_variable("global_step", [],
                                      initializer=tf.constant_initializer(0),
                                      trainable=False)
        opt = tf.train.GradientDescentOptimizer(0.1)
        images = tf.placeholder(tf.float32, [NUM_GPUS * 16, 8, 8, 3])
        labels = tf.placeholder(tf.int32, [NUM_GPUS * 16])
        if variant == "contrib":
            batch_queue = tf.contrib.slim.prefetch_queue.prefetch_queue(
                [images, labels], capacity=2 * NUM_GPUS)
        batches = list(zip(tf.split(images, NUM_GPUS), tf.split(labels, NUM_GPUS)))
        if variant == "no_scope_wrapper":
            loss, tower_grads = build_towers(opt, batches, reuse=True)
        else:
            with tf.variable_scope(tf.get_variable_scope()):
                loss, tower_grads = build_towers(opt, batches, reuse=variant != "no_reuse")
        grads = average_gradients(tower_grads)
        apply_gradient_op = opt.apply_gradients(grads, global_step=global_step)
        # Track the moving averages of all trainable variables.
        variable_averages = tf.train.ExponentialMovingAverage(MOVING_AVERAGE_DECAY,
                                                              global_step)
        variables_averages_op = variable_averages.apply(tf.trainable_variables())
        train_op = tf.group(apply_gradient_op, variables_averages_op)
        init = tf.global_variables_initializer()
        sess = tf.Session(config=tf.ConfigProto(allow_soft_placement=True))
        sess.run(init)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((NUM_GPUS * 16, 8, 8, 3)).astype("float32")
        y = (x.mean(axis=(1, 2, 3)) > 0).astype("int32") * 3
        for step in range(20):
            _, loss_value = sess.run([train_op, loss], feed_dict={images: x, labels: y})
        print("step %d, loss = %.2f" % (step, loss_value))


if __name__ == "__main__":
    tf.disable_eager_execution()
    parser = argparse.ArgumentParser()
    parser.add_argument("--variant", default="ok",
                        choices=["ok", "no_scope_wrapper", "no_reuse", "contrib"])
    train(parser.parse_args().variant)
