"""Probes: one module per probe, each a ``run(config: dict) -> dict`` run inside a child.

env, placement, memory, scaling (`gpudiag scaling`'s child for one device count: each
strategy trained in turn, the all-reduce sweep in the largest), training (one strategy's
run of the workload), allreduce
(the collective sweep), cluster (one task of a multi-worker or parameter-server run) and
slurm (a Slurm allocation resolved); devices.py sets up the child's devices (real GPUs, a
split GPU, or virtual CPU devices). Their configs and results are typed records in
gpudiag/records/ (to_dict in the child, from_dict in the parent).
"""
