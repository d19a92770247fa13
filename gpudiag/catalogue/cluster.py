"""TensorFlow's own messages about multi-worker clusters: exact text, meaning, fix.

Part of the one catalogue (gpudiag.catalogue.all_entries). ``kind`` "log" is a line
TensorFlow writes (its C++ log or its Python logger); "crash" an exception's
``Type: message``. Every ``example`` is text TensorFlow 2.21 printed on this project's
machine (``source`` "captured": tests/data/cluster_tf_2.21/ holds the whole stderr of
each run; tests/unit/test_cluster_messages.py matches every entry against it) or, where
noted, a message of TensorFlow's Python source. gpudiag.cluster.messages reads a task's
output with them.
"""

from __future__ import annotations

from gpudiag.catalogue.entry import Entry

KERAS_ISSUES = ("keras-team/keras#20585", "tensorflow/tensorflow#72388")

_NOT_FORMED_FIX = (
    "Start every task listed in TF_CONFIG, each with its own task.index; check that each "
    "address is the one the other machines reach (not localhost across machines) and that "
    "no firewall blocks the ports; set TF_CONFIG before the strategy is created.")

ENTRIES: tuple[Entry, ...] = (
    Entry("cluster-waiting-for-tasks", "log", "distribute", "info",
          r"Waiting for (?P<missing>[1-9]\d*)/(?P<total>\d+) tasks to connect",
          "The coordination service (on the chief, or worker 0) is waiting for tasks to "
          "join; the lines after `Example stragglers:` name them. Normal for a moment at "
          "start-up; if the run stops here, those tasks never connected: not started, a "
          "wrong task index or address, or TF_CONFIG set after the strategy was created.",
          _NOT_FORMED_FIX,
          "I0000 00:00:1795327890.778543   11495 coordination_service.cc:502] Waiting for "
          "1/2 tasks to connect.", "captured"),
    Entry("cluster-peer-unhealthy", "log", "distribute", "fail",
          r"The following tasks are unhealthy \(stopped sending heartbeats\)",
          "A task stopped sending heartbeats (it crashed, was killed, or hangs); TensorFlow "
          "aborted the collectives of every other task. MultiWorkerMirroredStrategy cannot "
          "go on without it.",
          "Read that task's own log for its error; restart the whole cluster (a backup, "
          "such as BackupAndRestore or gpudiag's, lets it resume where it stopped).",
          "E0000 00:00:1795327915.775662   11700 base_collective_executor.cc:252] "
          "BaseCollectiveExecutor::StartAbort UNAVAILABLE: Error reported from "
          "/job:worker/task:1: The following tasks are unhealthy (stopped sending "
          "heartbeats):", "captured"),
    Entry("cluster-peer-connection-lost", "log", "distribute", "fail",
          r"Additional GRPC error information from remote target "
          r"(?P<task>/job:\w+/replica:\d+/task:\d+) while calling",
          "A call to the named task failed; with `Connection reset by peer` or "
          "`Connection refused` that task's process has ended or is not listening.",
          "Read the named task's log for why it ended; restart the cluster.",
          "Additional GRPC error information from remote target "
          "/job:worker/replica:0/task:0 while calling "
          "/tensorflow.WorkerService/CompleteInstance:", "captured"),
    Entry("collective-timeout", "log", "distribute", "fail",
          r"Collective has timed out during execution",
          "An all-reduce waited longer than CommunicationOptions(timeout_seconds=...) for "
          "its peers: another task is stopped, hung, or much slower.",
          "Find the task that did not arrive (its log, `top`); raise timeout_seconds only "
          "if a step is genuinely that long.",
          "E0000 00:00:1795327957.057247   13439 base_collective_executor.cc:252] "
          "BaseCollectiveExecutor::StartAbort DEADLINE_EXCEEDED: Collective has timed out "
          "during execution.", "captured"),
    Entry("grpc-port-in-use", "log", "distribute", "fail",
          r"Failed to add port to server: No address added out of total \d+ resolved for "
          r"'(?P<address>[^']+)'",
          "This task's port is already taken: another task was given the same task.index "
          "(or address), or an earlier run still holds the port. Note the address: "
          "TensorFlow listens on every interface (0.0.0.0), whatever host TF_CONFIG names.",
          "Give each process its own task.index; stop the earlier run (`ss -ltnp`), or use "
          "another port.",
          "E0000 00:00:1795327930.941843   12730 add_port.cc:83] Failed to add port to "
          "server: No address added out of total 1 resolved for '0.0.0.0:46073'",
          "captured"),
    Entry("grpc-server-failed", "crash", "distribute", "fail",
          r"UnknownError: Could not start gRPC server",
          "This task's TensorFlow server could not start, usually because its port is "
          "taken (see `Failed to add port to server` just before).",
          "Give each process its own task.index and port; stop earlier runs.",
          "tensorflow.python.framework.errors_impl.UnknownError: Could not start gRPC "
          "server", "captured"),
    Entry("collective-after-startup", "crash", "distribute", "fail",
          r"RuntimeError: Collective ops must be configured at program startup",
          "The program ran a TensorFlow op (or made a tensor, or listed logical devices) "
          "before creating MultiWorkerMirroredStrategy; collectives must be configured "
          "before TensorFlow initialises.",
          "Create the strategy first, right after importing TensorFlow and setting "
          "TF_CONFIG, before any other TensorFlow call.",
          "RuntimeError: Collective ops must be configured at program startup", "captured"),
    Entry("collective-not-at-startup", "log", "distribute", "warn",
          r"Collective ops is not configured at program startup",
          "A single-worker MultiWorkerMirroredStrategy was created after TensorFlow "
          "initialised; some collective performance features are off.",
          "Create the strategy before any other TensorFlow call.",
          "WARNING:tensorflow:Collective ops is not configured at program startup. Some "
          "performance features may not be enabled.",
          "python: tensorflow/python/distribute/collective_all_reduce_strategy.py"),
    Entry("single-worker-mwms", "log", "distribute", "warn",
          r"Single-worker MultiWorkerMirroredStrategy with local_devices",
          "This process's MultiWorkerMirroredStrategy saw no cluster: TF_CONFIG was not "
          "set when the strategy was created (set after it, or not exported), so this "
          "process trains alone and nothing is synchronised with the others.",
          "Set TF_CONFIG in the environment before the program starts (or at least before "
          "the strategy is created).",
          "INFO:tensorflow:Single-worker MultiWorkerMirroredStrategy with local_devices = "
          "('/device:CPU:0',), communication = CommunicationImplementation.AUTO",
          "captured"),
    Entry("keras3-fit-perreplica", "crash", "distribute", "fail",
          r"Attempt to convert a value \(PerReplica:\{",
          "Keras 3's Model.fit does not work under MultiWorkerMirroredStrategy: it hands a "
          "per-replica batch to an op that expects one tensor (a known Keras 3 problem: "
          + ", ".join(KERAS_ISSUES) + "). The model is fine.",
          "Use the legacy Keras 2 path: `pip install tf_keras` (the version of your "
          "TensorFlow), set TF_USE_LEGACY_KERAS=1 before importing TensorFlow and use "
          "tf.keras; or train with a custom loop (strategy.run), as gpudiag's probe does.",
          "ValueError: Attempt to convert a value (PerReplica:{", "captured"),
    Entry("tf-caught-sigterm", "log", "distribute", "info",
          r"preemption_notifier\.cc:\d+\] SIGTERM caught at",
          "TensorFlow's preemption notifier (installed by MultiWorkerMirroredStrategy) "
          "caught SIGTERM: it treats SIGTERM as a notice that the machine is being "
          "preempted, for tf.distribute.experimental.PreemptionCheckpointHandler, so the "
          "program does not end on SIGTERM by itself.",
          "To stop such a program use SIGKILL, or SIGINT (Ctrl-C); to save on preemption, "
          "wrap the training loop in PreemptionCheckpointHandler.",
          "W0000 00:00:1795334173.968711    1620 preemption_notifier.cc:90] SIGTERM caught "
          "at 2026-11-22T07:56:13.968709445+00:00", "captured"),
    Entry("auto-shard-data", "log", "data", "info",
          r"AUTO sharding policy will apply DATA sharding policy as it failed to apply FILE "
          r"sharding policy because of the following reason: (?P<reason>.*)",
          "Informational: the dataset is not read from files, so each worker builds the "
          "whole input and keeps every N-th element (DATA sharding). Correct, but every "
          "worker does all of the input work.",
          "Set the policy you want: options = tf.data.Options(); "
          "options.experimental_distribute.auto_shard_policy = "
          "tf.data.experimental.AutoShardPolicy.DATA (or FILE with several files, or OFF "
          "when each worker reads its own shard); dataset = dataset.with_options(options).",
          "I0000 00:00:1795327976.913739   13880 auto_shard.cc:799] AUTO sharding policy "
          "will apply DATA sharding policy as it failed to apply FILE sharding policy "
          "because of the following reason: Found an unshardable source dataset: "
          "goo.gle/debugproto   ", "captured"),
    Entry("session-waiting-for-task", "log", "distribute", "warn",
          r"CreateSession still waiting for response from worker: "
          r"(?P<task>/job:\w+/replica:\d+/task:\d+)",
          "A tf.compat.v1 Session (MonitoredTrainingSession, between-graph replication) "
          "cannot start: TensorFlow's master waits for every task of the cluster spec and "
          "the named one does not answer (not started, or already finished: a chief that "
          "ended before a non-chief worker was ready, which checks every 30 s). It says "
          "so every 10 s and waits forever.",
          "Start the named task (a ps first); if it has already finished, let each worker "
          "see only the parameter servers and itself: "
          "tf.compat.v1.ConfigProto(device_filters=['/job:ps', '/job:worker/task:%d' % "
          "task_index]) as MonitoredTrainingSession(config=...).",
          "I0000 00:00:1795522554.400429    3914 master.cc:278] CreateSession still "
          "waiting for response from worker: /job:worker/replica:0/task:1", "captured"),
    Entry("session-waiting-for-model", "log", "distribute", "info",
          r"Waiting for model to be ready\.",
          "A non-chief worker found the variables not initialised yet and sleeps "
          "(SessionManager's recovery_wait_secs, 30 s) before it looks again; the chief "
          "initialises them. Normal at start-up; a worker that keeps saying it waits for a "
          "chief that is not running.",
          "Start the chief (worker task 0, is_chief=True); expect up to 30 s before a "
          "non-chief worker trains.",
          "Waiting for model to be ready.  Ready_for_local_init_op:  None, ready: "
          "Variables not initialized: w, b, global_step",
          "python: tensorflow/python/training/session_manager.py"),
    Entry("keras3-datasetcreator-removed", "crash", "distribute", "fail",
          r"AttributeError: module 'keras\.utils' has no attribute 'experimental'",
          "Keras 3 removed tf.keras.utils.experimental.DatasetCreator, which the "
          "parameter-server tutorial's Model.fit section uses: under TensorFlow 2.16+ "
          "tf.keras is Keras 3.",
          "Keep the tutorial's Model.fit with tf_keras (pip install tf_keras, run with "
          "TF_USE_LEGACY_KERAS=1, the version matching TensorFlow's), or use its custom "
          "loop: ClusterCoordinator.create_per_worker_dataset(dataset_fn) and "
          "coordinator.schedule(step_fn, ...).",
          "AttributeError: module 'keras.utils' has no attribute 'experimental'",
          "captured"),
    Entry("keras3-sharded-variable", "crash", "distribute", "fail",
          r"'ShardedVariable' object has no attribute 'handle'",
          "ParameterServerStrategy's variable_partitioner split a variable into shards "
          "(a ShardedVariable), which Keras 3 layers and optimizers do not support: the "
          "gradient step fails on it (the tutorial's own check that the embedding has two "
          "shards fails under Keras 3 for the same reason).",
          "Under Keras 3 create the strategy without variable_partitioner (or with a "
          "MinSizePartitioner whose min_shard_bytes keeps every variable whole); to shard "
          "embeddings across parameter servers use tf_keras (TF_USE_LEGACY_KERAS=1).",
          "AttributeError: 'ShardedVariable' object has no attribute 'handle'",
          "captured"),
)
