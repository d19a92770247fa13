"""Multi-worker clusters on TensorFlow's own engine; everything here is TF-free.

- supervise.py   start a cluster's tasks as child processes, follow their progress,
                 detect a cluster that never forms or a task that dies, restart and
                 resume, stop everything: bounded in time, nothing left running.
- clusterrun.py  what a configuration runs and how each task went, as records.
- messages.py    TensorFlow's own messages about clusters: exact text, meaning, fix.
- sockets.py     where each task really listened (/proc).
- judge.py       cluster runs -> rows for gpudiag.verdicts.cluster, the table, TensorBoard.
- options.py     the options of `scaling --workers` and `worker`, checked once.
- local.py       `gpudiag scaling --workers N`.
- worker_cmd.py  `gpudiag worker` (TF_CONFIG or --slurm).
- whyslow.py     cluster.bottleneck: the leader's trace broken down.

TF_CONFIG's parsing and a task's typed config and result are records every side reads:
gpudiag/records/tfconfig.py and gpudiag/records/cluster.py.

The TensorFlow side runs in the tasks' children: gpudiag/probes/cluster.py,
gpudiag/train/multiworker.py (sync), gpudiag/train/parameter_server.py (ps),
gpudiag/train/cluster_data.py; gpudiag/probes/slurm.py resolves a Slurm allocation.
"""
