"""The command line's training commands: `scaling` (the probe on 1, 2, 4 ... devices, or
on a local cluster of workers) and `worker` (this machine's task in a real cluster).
Registered on gpudiag.cli's app in its place among the commands.
"""

from __future__ import annotations

from pathlib import Path

import typer

from gpudiag import cliopts as opt
from gpudiag.cluster import options as cluster_opts
from gpudiag.execute import execute_with_nvml
from gpudiag.records.training import Workload
from gpudiag.scaling.options import ScalingOptions

commands = typer.Typer()


@commands.command(short_help="Train on 1, 2, 4 ... devices: faster with more?")
def scaling(
    ctx: typer.Context,
    max_gpus: int | None = opt.MaxGpusOpt,
    strategy: str = opt.StrategyOpt,
    model: str = opt.ModelOpt,
    batch_per_device: int = opt.BatchPerDeviceOpt,
    steps: int = opt.StepsOpt,
    warmup_steps: int = opt.WarmupStepsOpt,
    profile_steps: int = opt.ProfileStepsOpt,
    learning_rate: float = opt.LearningRateOpt,
    ema_decay: float = opt.EmaDecayOpt,
    histogram_every: int = opt.HistogramEveryOpt,
    variables_on: str = opt.VariablesOnOpt,
    data: Path | None = opt.DataOpt,
    allreduce_max_mb: float = opt.AllreduceMaxOpt,
    allreduce_min_mb: float = opt.AllreduceMinOpt,
    virtual_gpus: int | None = opt.VirtualGpusOpt,
    virtual_gpu_memory_mb: int = opt.VirtualGpuMemOpt,
    timeout: float = opt.ScalingTimeoutOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    workers: int | None = cluster_opts.WorkersOpt,
    mode: str | None = cluster_opts.ModeOpt,
    batch_factor: int = cluster_opts.BatchFactorOpt,
    restarts: int = cluster_opts.RestartsOpt,
    fault: str | None = cluster_opts.FaultOpt,
    form_timeout: float = cluster_opts.FormTimeoutOpt,
    collective_timeout: float = cluster_opts.CollectiveTimeoutOpt,
) -> None:
    """Train the probe on 1, 2, 4 ... devices: faster with more devices? did every one work?
    With --workers N: on a local cluster of 1, then N, TensorFlow worker processes."""
    from gpudiag.commands import scaling as scaling_cmd
    from gpudiag.scaling.options import check, parse_strategies

    workload = Workload(
        model=model, batch_per_device=batch_per_device, steps=steps, warmup_steps=warmup_steps,
        profile_steps=profile_steps, learning_rate=learning_rate, ema_decay=ema_decay,
        histogram_every=histogram_every, variables_on=variables_on,
        data=None if data is None else str(data),
    )
    if workers is not None or mode is not None:  # a local cluster: gpudiag/cluster/local.py
        from gpudiag.cluster import local

        given = cluster_opts.ClusterOptions(
            workload=workload, batch_factor=batch_factor, restarts=restarts,
            form_timeout_s=form_timeout, collective_timeout_s=collective_timeout,
            timeout_s=timeout)
        copts = cluster_opts.from_cli(
            given, workers=workers, mode=mode, fault=fault,
            not_with_workers={"--max-gpus": max_gpus, "--virtual-gpus": virtual_gpus})

        execute_with_nvml(ctx, "scaling", logdir, as_json,
                          lambda session, backend, ui: local.run(
                              session, copts, backend=backend, ui=ui))
    options = ScalingOptions(
        workload=workload, max_gpus=max_gpus, strategies=parse_strategies(strategy),
        virtual_gpus=virtual_gpus, memory_limit_mb=virtual_gpu_memory_mb,
        allreduce_min_mb=allreduce_min_mb, allreduce_max_mb=allreduce_max_mb, timeout_s=timeout,
    )
    check(options)  # once, before the run directory exists

    execute_with_nvml(ctx, "scaling", logdir, as_json,
                      lambda session, backend, ui: scaling_cmd.run(
                          session, options, backend=backend, ui=ui))


@commands.command(short_help="Join a real cluster as this machine's task.")
def worker(
    ctx: typer.Context,
    mode: str = cluster_opts.WorkerModeOpt,
    slurm: bool = cluster_opts.SlurmOpt,
    slurm_port_base: int = cluster_opts.SlurmPortBaseOpt,
    model: str = opt.ModelOpt,
    batch_per_device: int = opt.BatchPerDeviceOpt,
    steps: int = opt.StepsOpt,
    warmup_steps: int = opt.WarmupStepsOpt,
    profile_steps: int = opt.ProfileStepsOpt,
    form_timeout: float = cluster_opts.FormTimeoutOpt,
    collective_timeout: float = cluster_opts.CollectiveTimeoutOpt,
    timeout: float = typer.Option(600.0, "--timeout", callback=opt.positive, metavar="SECONDS",
                                  help="Seconds this task may run in all."),
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Join a real cluster (TF_CONFIG, or --slurm) as this machine's task; the chief
    writes the combined report. See docs/cluster.md."""
    from gpudiag.cluster import worker_cmd

    options = worker_cmd.WorkerOptions(
        workload=Workload(model=model, batch_per_device=batch_per_device, steps=steps,
                          warmup_steps=warmup_steps, profile_steps=profile_steps),
        mode=mode, slurm=slurm, slurm_port_base=slurm_port_base, form_timeout_s=form_timeout,
        collective_timeout_s=collective_timeout, timeout_s=timeout)
    tfc, env = worker_cmd.resolve(options)  # exit 2 on a bad TF_CONFIG, before anything

    execute_with_nvml(ctx, "worker", logdir, as_json,
                      lambda session, backend, ui: worker_cmd.run(
                          session, options, tfc, env, logdir=logdir, backend=backend,
                          ui=ui))
