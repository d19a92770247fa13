"""Multi-worker clusters on TensorFlow's own engine; everything here is TF-free.

- tfconfig.py    TF_CONFIG parsed and checked (one line, exit 2), local clusters on
                 127.0.0.1 with free ports.
- records.py     the typed config and result of one cluster task's child.
- supervise.py   start a cluster's tasks as child processes, follow their progress,
                 detect a cluster that never forms or a task that dies, restart and
                 resume, stop everything: bounded in time, nothing left running.
- messages.py    TensorFlow's own messages about clusters: exact text, meaning, fix.
- sockets.py     where each task really listened (/proc).
- judge.py       cluster runs -> rows for gpudiag.verdicts.cluster, the table, TensorBoard.
- options.py     the options of `scaling --workers` and `worker`, checked once.
- local.py       `gpudiag scaling --workers N`.
- worker_cmd.py  `gpudiag worker` (TF_CONFIG or --slurm).

The TensorFlow side runs in the tasks' children: gpudiag/probes/cluster.py,
gpudiag/train/multiworker.py (sync), gpudiag/train/parameter_server.py (ps),
gpudiag/train/cluster_data.py; gpudiag/probes/slurm.py resolves a Slurm allocation.
"""
