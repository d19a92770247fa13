"""`gpudiag scaling --workers N`: the probe on a cluster of processes on this machine.

Per mode (``--mode``: sync, ps or both), per batch per worker (``--batch-per-device``
and ``--batch-factor`` times it) and per worker count (1, then N), one cluster
configuration: its TF_CONFIGs (every address 127.0.0.1, ports the OS said were free,
gpudiag.records.tfconfig), one child process per task run and supervised by
gpudiag.cluster.supervise, NVML sampled meanwhile (when there is NVML; with GPUs,
worker i sees GPU i mod the GPU count). With ``--fault`` only the N-worker
configuration at the first batch runs: it is a drill, not a measurement.

Then the verdicts (gpudiag.verdicts.cluster, through gpudiag/cluster/judge.py): how
each configuration ended, each worker's measured examples/s and their sum, 1 beside N
workers at each batch, what the larger batch changed, sync beside ps, TensorFlow's
messages recognised in the tasks' logs, and where the tasks listened.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from gpudiag import layout, nvml
from gpudiag.cluster import judge, whyslow
from gpudiag.cluster.clusterrun import ClusterRun, Limits, TaskSpec
from gpudiag.cluster.options import ClusterOptions
from gpudiag.cluster.supervise import run_cluster
from gpudiag.records import tfconfig
from gpudiag.records.cluster import WorkerConfig, role_of
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import cluster as verdicts
from gpudiag.verdicts import gpu_use as gpu_verdicts

NVML_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT


def limits(options: ClusterOptions) -> Limits:
    return Limits(form_timeout_s=options.form_timeout_s, timeout_s=options.timeout_s,
                  grace_s=options.grace_s, restarts=options.restarts)


def gpu_env(role: str, task_type: str, ordinal: int, gpu_count: int) -> dict[str, str]:
    """With GPUs: a computing task gets one (worker i: GPU i mod count, in PCI order, as
    NVML numbers them); a ps-mode chief or ps none. Without GPUs: nothing set."""
    if not gpu_count:
        return {}
    if role == "trainer" or (role == "server" and task_type == "worker"):
        return {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_VISIBLE_DEVICES": str(ordinal % gpu_count)}
    return {"CUDA_VISIBLE_DEVICES": ""}


def task_specs(run_dir: Path, name: str, mode: str, n_workers: int, batch: int,
               options: ClusterOptions, gpu_count: int) -> list[TaskSpec]:
    """Every task of one local configuration, with its TF_CONFIG and config."""
    cluster = tfconfig.local_cluster(mode, n_workers, options.n_ps)
    workload = replace(options.workload, batch_per_device=batch)
    specs = []
    ordinal = 0
    for tfc in tfconfig.tasks_of(cluster):
        role = role_of(mode, tfc.task_type)
        config = WorkerConfig(
            mode=mode, workload=workload, logdir=str(run_dir / name / tfc.task),
            backup_dir=str(run_dir / name / layout.BACKUP_DIR / tfc.task),
            backup_every=options.backup_every, collective_timeout_s=options.collective_timeout_s,
            server_wait_s=options.form_timeout_s + options.grace_s)
        specs.append(TaskSpec(tfc.task, tfc.task_type, tfc.task_index, role, tfc.to_json(),
                              config, gpu_env(role, tfc.task_type, ordinal, gpu_count)))
        if tfc.task_type == "worker":
            ordinal += 1
    return specs


def configurations(options: ClusterOptions) -> list[tuple[str, int, int]]:
    """(mode, batch per worker, worker count) in run order."""
    if options.fault is not None:
        return [(options.modes[0], options.batches[0], options.workers)]
    return [(m, b, n) for m in options.modes for b in options.batches
            for n in options.worker_counts()]


def run(session: RunSession, options: ClusterOptions, *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui) -> None:
    """The whole local cluster diagnosis into ``session``; see the module docstring."""
    session.set("cluster_options", options.to_dict())
    reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    gpu_count = 0 if isinstance(backend, nvml.NvmlUnavailable) else backend.device_count()
    progress = ui.progress()
    runs: list[ClusterRun] = []
    samplings: dict[str, nvml.SamplingResult | None] = {}
    interrupted: KeyboardInterrupt | None = None
    with progress:
        try:
            for mode, batch, n in configurations(options):
                name = layout.cluster_config_name(mode, n, batch)
                bar = progress.add_task(name, total=options.workload.steps, status="starting")

                def on_step(task: str, step: int, bar: Any = bar) -> None:
                    progress.update(bar, completed=step, status=f"{task} step {step}")

                sampler = (None if isinstance(backend, nvml.NvmlUnavailable)
                           else nvml.Sampler(backend).start())
                try:
                    result = run_cluster(session.run_dir, name, mode,
                                         task_specs(session.run_dir, name, mode, n, batch,
                                                    options, gpu_count),
                                         limits(options), fault=options.fault,
                                         on_step=on_step)
                finally:
                    samplings[name] = sampler.stop() if sampler is not None else None
                runs.append(result)
                progress.update(bar, status=result.outcome)
        except KeyboardInterrupt as exc:
            interrupted = exc
    judge_runs(session, options, runs, samplings, reason, gpu_count, ui)
    if interrupted is not None:
        raise interrupted


def judge_runs(session: RunSession, options: ClusterOptions, runs: list[ClusterRun],
               samplings: dict[str, nvml.SamplingResult | None], reason: str | None,
               gpu_count: int, ui: Ui) -> None:
    lim = limits(options)
    rows = [judge.config_row(r, lim, shared_machine=True) for r in runs]
    for r, row in zip(runs, rows, strict=True):
        session.add(verdicts.cluster_run(row))
        sampling = samplings.get(r.name)
        if sampling is not None:
            nvml.write_scalars(sampling, session.run_dir / layout.NVML_TB_RUN / r.name)
            expected = sorted({i % gpu_count for i in range(r.n_workers)}) if gpu_count else None
            session.add(gpu_verdicts.every_gpu_used(
                sampling.summaries, NVML_IDLE_THRESHOLD_PERCENT, expected_indices=expected,
                check_id=f"cluster.nvml.{r.name}"))
    if reason is not None:
        session.add(gpu_verdicts.every_gpu_used([], NVML_IDLE_THRESHOLD_PERCENT,
                                                nvml_unavailable_reason=reason,
                                                check_id="cluster.nvml"))
    if options.fault is None:
        for mode in options.modes:
            mine = [row for row in rows if row["mode"] == mode]
            for batch in options.batches:
                session.add(verdicts.cluster_scaling(
                    mode, batch, [row for row in mine if row["batch_per_worker"] == batch]))
            if len(options.batches) > 1:
                session.add(verdicts.batch_payoff(mode, mine))
        if len(options.modes) > 1:
            session.add(verdicts.sync_vs_ps(*_same_shape(rows, options)))
    for finding in whyslow.findings(runs):  # why each configuration is as fast as it is
        session.add(finding)
    for finding in verdicts.tf_messages(
            judge.seen_messages(runs),
            never_formed=any(r.outcome == "never-formed" for r in runs),
            recovered=[r.name for r in runs if r.outcome == "complete" and r.restarts_used],
            completed=[r.name for r in runs if r.outcome == "complete" and not r.restarts_used]):
        session.add(finding)
    session.add(verdicts.listening(
        [{**t, "task": f"{row['config']}/{t['task']}"} for row in rows for t in row["tasks"]],
        tf_config_loopback=True))
    session.set("cluster", {"rows": rows, "configs": {r.name: judge.run_data(r) for r in runs}})
    judge.write_tb(session.run_dir, rows)
    from gpudiag.markdown import markdown_table

    session.text(layout.TAG_CLUSTER_TABLE, markdown_table(judge.TABLE_HEADERS, judge.table(rows)))
    if rows:
        ui.show(judge.rich_table(rows))


def _same_shape(rows: list[dict[str, Any]], options: ClusterOptions,
                ) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The sync and ps rows with N workers at the first batch."""

    def pick(mode: str) -> dict[str, Any] | None:
        return next((r for r in rows if r["mode"] == mode and r["n_workers"] == options.workers
                     and r["batch_per_worker"] == options.batches[0]), None)

    return pick("sync"), pick("ps")
