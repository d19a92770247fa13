"""Verdicts of `gpudiag run`: pure functions from one program's records to findings.

- ``process``: per TensorFlow process (was TensorFlow imported, devices, distribution);
  ``tflog`` TensorFlow's log against the catalogue.
- ``devices``: eager pins and created logical devices.
- ``placement``: ops per device, pinned against placed, every device used.
- ``progress``: the command, learning and the profiler window (run.command, run.learning,
  run.profile) with ``learning_causes`` (the softmax floor, Keras's warnings),
  ``training_runs`` (fits of one model joined into one training run).
- ``crash``: the crash (run.crash) with ``crash_match`` (the catalogue against a crash's
  every line and the log around it), tracebacks (a traceback the program printed itself,
  read from its saved stderr).
- ``memory_config``: the GPU memory configuration and the Sessions' ConfigProto
  (run.memory, run.session-config).
- ``throughput``: the step period of each loop.
- ``hostcauses``: retracing, an eager training loop and the program's own Keras
  callbacks (run.retracing, run.eager-loop, run.callbacks), from the step series.
- ``kerascalls``: Keras calls made one at a time from the program's loop
  (run.keras-calls): many small predict/fit calls that take its time, at their lines.
- ``precision``: a 16-bit Keras policy on a device without fast 16-bit math
  (run.precision).
- ``live``: what is decided while the program runs (stalls, a non-finite loss).
- ``gpu_idle``: a GPU that NVML saw idle while the program ran.
- ``peers``: a cluster's other tasks, live (who is behind, a worker gone).
- ``cluster``: the program's cluster (TF_CONFIG, the strategy, the tasks together), with
  ``cluster_tasks`` (the tasks as the records show them) and ``cluster_problems`` (what
  went wrong with the cluster as a whole).
- ``ps``: parameter-server jobs (tasks, where variables live, async or sync).
- ``tf1``: TF1 distribution named by what the program built (between-graph replication
  with replica_device_setter, MonitoredTrainingSession, SyncReplicasOptimizer; in-graph
  towers).
- ``outcome``: saved output and processes that outlived the program.
- ``loss_setup``: the loss against the labels and the last layer (run.loss-setup),
  ``replica_losses``: a distributed fit's batch losses per replica or summed.
- ``strategy_cost``: a tf.distribute strategy against no strategy (run.strategy).
- ``notebook``: what a notebook's watch() could not see before its block (run.notebook).

Same rules as every verdict module: no TensorFlow, no NVML calls, no I/O.
"""
