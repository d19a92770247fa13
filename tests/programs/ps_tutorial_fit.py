"""The TF2 parameter-server tutorial's `Model.fit` path, as the tutorial writes it.

Source: tensorflow/docs site/en/tutorials/distribute/parameter_server_training.ipynb
("In-process cluster", "Instantiate a ParameterServerStrategy", "Training with
`Model.fit`": its `dataset_fn` of an InputContext wrapped in
`tf.keras.utils.experimental.DatasetCreator`, a `Sequential([Dense(10)])` compiled with
SGD, mse and `steps_per_execution=10`, and `model.fit(dc, epochs=5, steps_per_epoch=20,
callbacks=...)`). `DatasetCreator` is Keras 2's: run it with tf_keras
(`TF_USE_LEGACY_KERAS=1`); under Keras 3 it fails with "module 'keras.utils' has no
attribute 'experimental'". Adapted only where this machine forces it:
- `portpicker.pick_unused_port()` -> ports bound on 127.0.0.1 and released (no portpicker
  here), and `localhost` -> `127.0.0.1` (loopback only);
- the callbacks' `working_dir` is the first argument (a temporary directory in tests)
  instead of `/tmp/my_working_dir`;
- `verbose=2` (one line per epoch, not a progress bar).
"""
# The tutorial's code as it is written (its % formats):
# ruff: noqa: UP031, RET504, PTH118

import multiprocessing
import os
import socket
import sys

import tensorflow as tf


def pick_unused_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def create_in_process_cluster(num_workers, num_ps):
    """Creates and starts local servers and returns the cluster_resolver."""
    worker_ports = [pick_unused_port() for _ in range(num_workers)]
    ps_ports = [pick_unused_port() for _ in range(num_ps)]

    cluster_dict = {}
    cluster_dict["worker"] = ["127.0.0.1:%s" % port for port in worker_ports]
    if num_ps > 0:
        cluster_dict["ps"] = ["127.0.0.1:%s" % port for port in ps_ports]

    cluster_spec = tf.train.ClusterSpec(cluster_dict)

    # Workers need some inter_ops threads to work properly.
    worker_config = tf.compat.v1.ConfigProto()
    if multiprocessing.cpu_count() < num_workers + 1:
        worker_config.inter_op_parallelism_threads = num_workers + 1

    for i in range(num_workers):
        tf.distribute.Server(
            cluster_spec,
            job_name="worker",
            task_index=i,
            config=worker_config,
            protocol="grpc")

    for i in range(num_ps):
        tf.distribute.Server(
            cluster_spec,
            job_name="ps",
            task_index=i,
            protocol="grpc")

    cluster_resolver = tf.distribute.cluster_resolver.SimpleClusterResolver(
        cluster_spec, rpc_layer="grpc")
    return cluster_resolver


# Set the environment variable to allow reporting worker and ps failure to the
# coordinator. This is a workaround and won't be necessary in the future.
os.environ["GRPC_FAIL_FAST"] = "use_caller"

NUM_WORKERS = 3
NUM_PS = 2
cluster_resolver = create_in_process_cluster(NUM_WORKERS, NUM_PS)

variable_partitioner = (
    tf.distribute.experimental.partitioners.MinSizePartitioner(
        min_shard_bytes=(256 << 10),
        max_shards=NUM_PS))

strategy = tf.distribute.experimental.ParameterServerStrategy(
    cluster_resolver,
    variable_partitioner=variable_partitioner)


def dataset_fn(input_context):
    global_batch_size = 64
    batch_size = input_context.get_per_replica_batch_size(global_batch_size)

    x = tf.random.uniform((10, 10))
    y = tf.random.uniform((10,))

    dataset = tf.data.Dataset.from_tensor_slices((x, y)).shuffle(10).repeat()
    dataset = dataset.shard(
        input_context.num_input_pipelines,
        input_context.input_pipeline_id)
    dataset = dataset.batch(batch_size)
    dataset = dataset.prefetch(2)

    return dataset


dc = tf.keras.utils.experimental.DatasetCreator(dataset_fn)

with strategy.scope():
    model = tf.keras.models.Sequential([tf.keras.layers.Dense(10)])

    model.compile(tf.keras.optimizers.SGD(), loss="mse", steps_per_execution=10)

working_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/my_working_dir"
log_dir = os.path.join(working_dir, "log")
ckpt_filepath = os.path.join(working_dir, "ckpt")
backup_dir = os.path.join(working_dir, "backup")

callbacks = [
    tf.keras.callbacks.TensorBoard(log_dir=log_dir),
    tf.keras.callbacks.ModelCheckpoint(filepath=ckpt_filepath),
    tf.keras.callbacks.BackupAndRestore(backup_dir=backup_dir),
]

model.fit(dc, epochs=5, steps_per_epoch=20, callbacks=callbacks, verbose=2)
