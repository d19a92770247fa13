"""A user's ParameterServerStrategy job on one machine: 1 ps, 2 workers, a coordinator.

As the TensorFlow tutorial writes it: the ps and worker tasks are processes running
`tf.distribute.Server(...).join()` (this file again, PS_ROLE set), the coordinator (this
process, the chief) creates ParameterServerStrategy and a ClusterCoordinator and schedules
steps onto the workers. When training is done it stops the servers (SIGTERM; they run
until stopped) and exits 0.
"""

import json
import os
import socket
import subprocess
import sys

ROLE = os.environ.get("PS_ROLE")

if ROLE:  # a ps or worker task: serve until stopped
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    server.join()
    sys.exit(0)


def free_ports(n):
    sockets = [socket.socket() for _ in range(n)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


ports = free_ports(4)
cluster = {"chief": [f"127.0.0.1:{ports[0]}"],
           "worker": [f"127.0.0.1:{ports[1]}", f"127.0.0.1:{ports[2]}"],
           "ps": [f"127.0.0.1:{ports[3]}"]}
servers = []
for task_type, index in (("ps", 0), ("worker", 0), ("worker", 1)):
    config = {"cluster": cluster, "task": {"type": task_type, "index": index}}
    servers.append(subprocess.Popen([sys.executable, __file__], env={
        **os.environ, "PS_ROLE": task_type, "TF_CONFIG": json.dumps(config)}))
os.environ["TF_CONFIG"] = json.dumps({"cluster": cluster, "task": {"type": "chief",
                                                                    "index": 0}})
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

try:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    coordinator = tf.distribute.experimental.coordinator.ClusterCoordinator(strategy)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.Input((16,)),
                                     tf.keras.layers.Dense(32, activation="relu"),
                                     tf.keras.layers.Dense(4)])
        optimizer = tf.keras.optimizers.SGD(learning_rate=0.1)

    def dataset_fn():
        rng = np.random.default_rng(3)
        x = rng.standard_normal((1024, 16)).astype("float32")
        y = x[:, :4].argmax(axis=1).astype("int64")
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(32)

    per_worker = coordinator.create_per_worker_dataset(dataset_fn)
    iterator = iter(per_worker)
    loss_fn = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    @tf.function
    def train_step(it):
        def replica_fn(batch):
            features, labels = batch
            with tf.GradientTape() as tape:
                loss = loss_fn(labels, model(features, training=True))
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables, strict=True))
            return loss
        return strategy.run(replica_fn, args=(next(it),))

    losses = [coordinator.schedule(train_step, args=(iterator,)) for _ in range(40)]
    coordinator.join()
    print("last loss", float(losses[-1].fetch()))
finally:
    for p in servers:
        p.terminate()
    for p in servers:
        p.wait()
