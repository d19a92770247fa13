"""The parts of `gpudiag scaling` around its orchestration (gpudiag/commands/scaling.py).

- options.py   ScalingOptions (what the command was asked: the CLI's defaults come from
               here and from records.Workload), their one-line checks, the device counts.
- judge.py     typed child results -> the plain-data inputs of gpudiag.verdicts (traces
               read, NVML cross-check, throughput points, learning rows) -> findings.
- table.py     the scaling table: cells, markdown for TensorBoard, a rich table.
- tb_runs.py   the parent's TensorBoard runs (``scaling/``, ``allreduce/``) and scaling.png.
- whyslow.py   scaling.bottleneck: each configuration's trace broken down.
- timing.py    where the run's time went (report.json's data.scaling.timing), per child and phase.

Nothing here imports TensorFlow: it all runs in the CLI's process. Names on disk are
gpudiag/layout/__init__.py's; what crosses the process boundary is gpudiag/records/training.py.
"""
