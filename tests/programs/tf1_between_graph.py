"""TF1 between-graph replication as the TensorFlow 1 book and its readers write it.

Source: the "Distributed TensorFlow" how-to of TensorFlow 1.x (tensorflow/tensorflow
tensorflow/docs_src/deploy/distributed.md, "Putting it all together: example trainer
program") and Hands-On Machine Learning (1st ed.), chapter 12. Each task is this file
started by hand:

    python tf1_between_graph.py --job_name=ps --task_id=0 --ps_hosts=H:P --worker_hosts=H:P,H:P
    python tf1_between_graph.py --job_name=worker --task_id=0 ...   # the chief
    python tf1_between_graph.py --job_name=worker --task_id=1 ...

Adapted: TF 2.21 through tf.compat.v1 (eager off); a linear model on generated data
instead of MNIST; 60 global steps instead of 1000000; the chief's checkpoint_dir from
--train_dir (a temporary directory in tests); `--sync` builds tf.train.SyncReplicasOptimizer
with its session hook as the how-to's synchronous variant does; `--device_filters` passes
`ConfigProto(device_filters=['/job:ps', '/job:worker/task:%d' % task_id])` to the session
(the way out when a worker must not wait for the others), `--soft_placement` sets
`allow_soft_placement = True` on it (as Hands-On ML does), `--stop_grace_period_secs N`
passes it to MonitoredTrainingSession (gpudiag's advice for a SyncReplicasOptimizer chief,
whose close otherwise waits up to 120 s for its queue runners). Tests only: `--hold_file F`
makes the chief, after `--hold_at` local steps, and a non-chief, before its session, wait
until F exists, so that a test lets the other worker create its session once the chief has
initialised the variables (a Session waits for every task's server, so both must be
running): ordered by events, not by TensorFlow's 30 s readiness retry.

What each worker builds (its ground truth): between-graph replication; its own graph under
`replica_device_setter(worker_device="/job:worker/task:N", cluster=...)`, which resolves
1 ps task from the cluster: the variables w, b and global_step on /job:ps/task:0, the ops
on the worker itself; a MonitoredTrainingSession with is_chief for worker 0 only;
asynchronous (each worker's GradientDescentOptimizer applies its own updates to the ps),
or with `--sync` synchronous: SyncReplicasOptimizer(replicas_to_aggregate=2,
total_num_replicas=2) for two workers, whose each worker also keeps a local step variable
on itself. The ps task runs only `server.join()`.
"""

# The how-to's code as it is written (its % formats, its argv):
# ruff: noqa: UP031, RUF005

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
FLAGS = None


def main(_):
    ps_hosts = FLAGS.ps_hosts.split(",")
    worker_hosts = FLAGS.worker_hosts.split(",")

    # Create a cluster from the parameter server and worker hosts.
    cluster = tf.train.ClusterSpec({"ps": ps_hosts, "worker": worker_hosts})

    # Create and start a server for the local task.
    server = tf1.train.Server(cluster, job_name=FLAGS.job_name, task_index=FLAGS.task_id)

    if FLAGS.job_name == "ps":
        server.join()
    elif FLAGS.job_name == "worker":
        is_chief = FLAGS.task_id == 0
        # Assigns ops to the local worker by default.
        with tf1.device(tf1.train.replica_device_setter(
                worker_device="/job:worker/task:%d" % FLAGS.task_id, cluster=cluster)):
            rng = np.random.default_rng(FLAGS.task_id)
            x_data = rng.standard_normal((256, 8)).astype("float32")
            y_data = x_data @ np.arange(1, 9, dtype="float32").reshape(8, 1)
            x = tf1.placeholder(tf.float32, [None, 8])
            y = tf1.placeholder(tf.float32, [None, 1])
            w = tf1.get_variable("w", [8, 1], initializer=tf1.zeros_initializer())
            b = tf1.get_variable("b", [1], initializer=tf1.zeros_initializer())
            loss = tf1.reduce_mean(tf1.square(tf1.matmul(x, w) + b - y))
            global_step = tf1.train.get_or_create_global_step()
            opt = tf1.train.GradientDescentOptimizer(0.01)
            if FLAGS.sync:
                opt = tf1.train.SyncReplicasOptimizer(
                    opt, replicas_to_aggregate=len(worker_hosts),
                    total_num_replicas=len(worker_hosts))
            train_op = opt.minimize(loss, global_step=global_step)

        # The StopAtStepHook handles stopping after running given steps.
        hooks = [tf1.train.StopAtStepHook(last_step=FLAGS.last_step)]
        if FLAGS.sync:
            hooks.append(opt.make_session_run_hook(is_chief))

        while FLAGS.hold_file and not is_chief and not Path(FLAGS.hold_file).exists():
            time.sleep(0.05)

        config = None
        if FLAGS.device_filters:  # each worker sees only the ps and itself
            config = tf1.ConfigProto(
                device_filters=["/job:ps", "/job:worker/task:%d" % FLAGS.task_id])
        if FLAGS.soft_placement:  # as Hands-On ML passes it
            config = config or tf1.ConfigProto()
            config.allow_soft_placement = True

        # gpudiag's advice for a SyncReplicasOptimizer chief (it waits for its queue
        # runners up to the stop grace period as it closes, 120 s by default)
        grace = {} if FLAGS.stop_grace_period_secs is None else {
            "stop_grace_period_secs": FLAGS.stop_grace_period_secs}

        # The MonitoredTrainingSession takes care of session initialization,
        # restoring from a checkpoint, saving to a checkpoint, and closing when done
        # or an error occurs.
        with tf1.train.MonitoredTrainingSession(master=server.target, is_chief=is_chief,
                                                checkpoint_dir=FLAGS.train_dir,
                                                hooks=hooks, config=config,
                                                **grace) as mon_sess:
            local_step = 0
            while not mon_sess.should_stop():
                i = (local_step * 32) % 256
                _, loss_value, step = mon_sess.run(
                    [train_op, loss, global_step],
                    feed_dict={x: x_data[i:i + 32], y: y_data[i:i + 32]})
                local_step += 1
                if is_chief and FLAGS.hold_file and local_step == FLAGS.hold_at:
                    print("chief: holding after %d local steps" % local_step, flush=True)
                    while not Path(FLAGS.hold_file).exists():
                        time.sleep(0.05)
            print("worker %d: %d local steps, global step %d, loss %f"
                  % (FLAGS.task_id, local_step, step, loss_value))


if __name__ == "__main__":
    tf1.disable_eager_execution()
    parser = argparse.ArgumentParser()
    parser.add_argument("--ps_hosts", type=str, default="")
    parser.add_argument("--worker_hosts", type=str, default="")
    parser.add_argument("--job_name", type=str, default="")
    parser.add_argument("--task_id", type=int, default=0)
    parser.add_argument("--train_dir", type=str, default=None)
    parser.add_argument("--last_step", type=int, default=60)
    parser.add_argument("--sync", action="store_true")
    parser.add_argument("--device_filters", action="store_true")
    parser.add_argument("--soft_placement", action="store_true")
    parser.add_argument("--stop_grace_period_secs", type=int, default=None)
    parser.add_argument("--hold_file", type=str, default="")
    parser.add_argument("--hold_at", type=int, default=5)
    FLAGS, unparsed = parser.parse_known_args()
    main([sys.argv[0]] + unparsed)
