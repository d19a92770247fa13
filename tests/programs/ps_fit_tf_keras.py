"""A user's ParameterServerStrategy job trained with tf_keras's Model.fit (Keras 2).

As the TensorFlow tutorial "Parameter server training: Model.fit" writes it, on one
machine: 1 ps and 2 worker tasks (this file again, PS_ROLE set, serving until stopped) and
the coordinator (this process). tf_keras refuses callbacks with batch-level hooks under
ParameterServerStrategy, so gpudiag's fit recorder must stand aside there. Exits 0.
"""

import json
import os
import socket
import subprocess
import sys

os.environ["TF_USE_LEGACY_KERAS"] = "1"
ROLE = os.environ.get("PS_ROLE")

if ROLE:  # a ps or worker task: serve until stopped
    import tensorflow as tf

    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    server = tf.distribute.Server(resolver.cluster_spec(), job_name=resolver.task_type,
                                  task_index=resolver.task_id, protocol="grpc", start=True)
    server.join()
    sys.exit(0)

sockets = [socket.socket() for _ in range(4)]
for s in sockets:
    s.bind(("127.0.0.1", 0))
ports = [s.getsockname()[1] for s in sockets]
for s in sockets:
    s.close()
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
import tensorflow as tf  # noqa: E402

try:
    resolver = tf.distribute.cluster_resolver.TFConfigClusterResolver()
    strategy = tf.distribute.experimental.ParameterServerStrategy(resolver)
    with strategy.scope():
        model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu"),
                                     tf.keras.layers.Dense(1)])
        model.compile(tf.keras.optimizers.legacy.SGD(learning_rate=0.05), loss="mse",
                      steps_per_execution=5)

    def dataset_fn(input_context):
        x = tf.random.uniform((256, 4))
        y = tf.reduce_sum(x, axis=1, keepdims=True)
        batch = input_context.get_per_replica_batch_size(32)
        return tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(batch).prefetch(2)

    history = model.fit(tf.keras.utils.experimental.DatasetCreator(dataset_fn), epochs=2,
                        steps_per_epoch=10, verbose=0)
    print("fit done, loss", history.history["loss"][-1], flush=True)
finally:
    for p in servers:
        p.terminate()
    for p in servers:
        p.wait()
