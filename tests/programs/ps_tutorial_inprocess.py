"""The TF2 parameter-server tutorial's custom training loop, as the tutorial writes it.

Source: tensorflow/docs site/en/tutorials/distribute/parameter_server_training.ipynb
("In-process cluster", "Instantiate a ParameterServerStrategy", "Training with a custom
training loop"). Adapted only where this machine forces it:
- `portpicker.pick_unused_port()` -> ports bound on 127.0.0.1 and released (no portpicker
  here), and `localhost` -> `127.0.0.1` (loopback only);
- the embedding's two-shard assertions are left out: Keras 3 does not apply the strategy's
  variable_partitioner, so they fail there (tf_keras passes them); the program prints the
  shard count instead;
- 3 epochs of 4 steps instead of 4 of 5, the embedding's output_dim 1024 instead of 16384:
  32 KiB, under the tutorial's MinSizePartitioner's 256 KiB, so nothing is sharded (under
  Keras 3 a sharded embedding fails in `tape.gradient` with "'ShardedVariable' object has no
  attribute 'handle'": Keras 3 does not support the strategy's variable_partitioner);
- the evaluation sections are left out;
- `tf.keras.losses.Reduction.NONE` -> `reduction="none"` and `accuracy.reset_states()` ->
  `accuracy.reset_state()`: Keras 3 removed the first two; both spellings work in tf_keras;
- the lookup layers are applied in the dataset's map directly, not through the tutorial's
  Functional `feature_preprocess_stage`/`label_preprocess_stage` models of a string Input
  (Keras 3 cannot trace those inside `distribute_datasets_from_function`);
- `tf.reduce_mean(emb_layer(model_input), axis=1)` -> `GlobalAveragePooling1D()` (the same
  mean over axis 1): Keras 3 refuses a TensorFlow op on a KerasTensor.
"""
# The tutorial's code as it is written (its % formats, its zip, its temporaries):
# ruff: noqa: UP031, RET504, B905

import multiprocessing
import os
import random
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
label_vocab = ["yes", "no"]

with strategy.scope():
    feature_lookup_layer = tf.keras.layers.StringLookup(
        vocabulary=feature_vocab,
        mask_token=None)
    label_lookup_layer = tf.keras.layers.StringLookup(
        vocabulary=label_vocab,
        num_oov_indices=0,
        mask_token=None)


def feature_and_label_gen(num_examples=200):
    examples = {"features": [], "label": []}
    for _ in range(num_examples):
        features = random.sample(feature_vocab, 3)
        label = ["yes"] if "avenger" in features else ["no"]
        examples["features"].append(features)
        examples["label"].append(label)
    return examples


examples = feature_and_label_gen()


def dataset_fn(_):
    raw_dataset = tf.data.Dataset.from_tensor_slices(examples)

    train_dataset = raw_dataset.map(
        lambda x: (
            {"features": feature_lookup_layer(x["features"])},
            label_lookup_layer(x["label"])
        )).shuffle(200).batch(32).repeat()
    return train_dataset


# These variables created under the `Strategy.scope` will be placed on parameter
# servers in a round-robin fashion.
with strategy.scope():
    # Create the model. The input needs to be compatible with Keras processing layers.
    model_input = tf.keras.layers.Input(
        shape=(3,), dtype=tf.int64, name="model_input")

    emb_layer = tf.keras.layers.Embedding(
        input_dim=len(feature_lookup_layer.get_vocabulary()), output_dim=1024)
    emb_output = tf.keras.layers.GlobalAveragePooling1D()(emb_layer(model_input))
    dense_output = tf.keras.layers.Dense(units=1, activation="sigmoid")(emb_output)
    model = tf.keras.Model({"features": model_input}, dense_output)

    optimizer = tf.keras.optimizers.RMSprop(learning_rate=0.1)
    accuracy = tf.keras.metrics.Accuracy()

print("embedding shards:", len(emb_layer.weights))


@tf.function
def step_fn(iterator):

    def replica_fn(batch_data, labels):
        with tf.GradientTape() as tape:
            pred = model(batch_data, training=True)
            per_example_loss = tf.keras.losses.BinaryCrossentropy(
                reduction="none")(labels, pred)
            loss = tf.nn.compute_average_loss(per_example_loss)
            gradients = tape.gradient(loss, model.trainable_variables)

        optimizer.apply_gradients(zip(gradients, model.trainable_variables))

        actual_pred = tf.cast(tf.greater(pred, 0.5), tf.int64)
        accuracy.update_state(labels, actual_pred)
        return loss

    batch_data, labels = next(iterator)
    losses = strategy.run(replica_fn, args=(batch_data, labels))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, losses, axis=None)


coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)


@tf.function
def per_worker_dataset_fn():
    return strategy.distribute_datasets_from_function(dataset_fn)


per_worker_dataset = coordinator.create_per_worker_dataset(per_worker_dataset_fn)
per_worker_iterator = iter(per_worker_dataset)

num_epoches = 3
steps_per_epoch = 4
for i in range(num_epoches):
    accuracy.reset_state()
    for _ in range(steps_per_epoch):
        coordinator.schedule(step_fn, args=(per_worker_iterator,))
    # Wait at epoch boundaries.
    coordinator.join()
    print("Finished epoch %d, accuracy is %f." % (i, accuracy.result().numpy()))

loss = coordinator.schedule(step_fn, args=(per_worker_iterator,))
print("Final loss is %f" % loss.fetch())
