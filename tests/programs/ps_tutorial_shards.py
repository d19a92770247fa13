"""The TF2 parameter-server tutorial's model and its check that the embedding was sharded,
as the tutorial writes them, under TensorFlow 2.21's default Keras 3.

Source: tensorflow/docs site/en/tutorials/distribute/parameter_server_training.ipynb
("In-process cluster", "Instantiate a ParameterServerStrategy" with its
MinSizePartitioner, "Training with a custom training loop": the model with
`Embedding(input_dim=len(feature_vocab) + 1, output_dim=16384)` built in
`strategy.scope()` and the tutorial's `assert len(emb_layer.weights) == 2`). Adapted: ports
bound on 127.0.0.1 and released (no portpicker), `localhost` -> `127.0.0.1`; the model is
built on a (None, 3) input instead of the string-lookup stage; the program ends after the
checks (the training sections are tests/programs/ps_tutorial_inprocess.py's).

Ground truth (captured here): under Keras 3 the first assert fails with no message
(AssertionError): Keras 3 does not create ShardedVariables from the strategy's
variable_partitioner, so the embedding has one weight, not two. No step ever runs: the
cluster is never used. With tf_keras (TF_USE_LEGACY_KERAS=1) the asserts pass.
"""
# The tutorial's code as it is written (its % formats):
# ruff: noqa: UP031, RET504

import multiprocessing
import os
import socket

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

feature_vocab = [
    "avenger", "ironman", "batman", "hulk", "spiderman", "kingkong", "wonder_woman"
]

with strategy.scope():
    # Create the model. The input needs to be compatible with Keras processing layers.
    model_input = tf.keras.layers.Input(
        shape=(3,), dtype=tf.int64, name="model_input")

    emb_layer = tf.keras.layers.Embedding(
        input_dim=len(feature_vocab) + 1, output_dim=16384)
    emb_output = tf.keras.layers.GlobalAveragePooling1D()(emb_layer(model_input))
    dense_output = tf.keras.layers.Dense(units=1, activation="sigmoid")(emb_output)
    model = tf.keras.Model({"features": model_input}, dense_output)

    optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.1)
    accuracy = tf.keras.metrics.Accuracy()

assert len(emb_layer.weights) == 2
assert emb_layer.weights[0].shape == (4, 16384)
assert emb_layer.weights[1].shape == (4, 16384)
print(emb_layer.weights[0].device)
print(emb_layer.weights[1].device)
