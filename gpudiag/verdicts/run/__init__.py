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
- ``hostcauses``: an eager training loop (run.eager-loop), a fit fed by a Python data
  class, and every host-side cause of the profiled step for run.bottleneck, from the step
  series; its families ``retracing`` (run.retracing) and ``callbacks`` (the program's own
  Keras callbacks, run.callbacks) and ``hostsync`` (tensors read back to Python every
  step, run.host-sync); ``host_common`` what they share.
- ``kerascalls``: Keras calls made one at a time from the program's loop
  (run.keras-calls): many small predict/fit calls that take its time, at their lines;
  ``rebuilt``: a model built anew for every fit (run.model-rebuilt).
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
