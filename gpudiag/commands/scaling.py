"""`gpudiag scaling`: train the probe on 1, 2, 4 ... devices; did more devices help?

Order of work, each probe in its own child process (gpudiag.procs.runner), each child's input
and output a typed record (gpudiag/records/training.py):

1. the collective bandwidth probe (probes/allreduce.py) on the largest device count. It
   is also the device check: asking for more GPUs than exist fails here, before any
   training, with exit 2 (or, with ``--virtual-gpus N``, GPU 0 is split into N);
2. per device count (1, 2, 4 ... powers of two up to ``--max-gpus``, plus the maximum)
   and per strategy (``--strategy``, default towers,mirrored): the training probe
   (probes/training.py) in a child with that many devices, while this process samples
   NVML (when there is NVML) and follows the child's progress lines; its TensorBoard run
   is ``<run dir>/<strategy>-<n>dev/``;
3. verdicts (gpudiag/scaling/judge.py -> gpudiag.verdicts): every device did work
   (placement, profiler trace, NVML), scaling efficiency against the communication lower
   bound, learning, towers beside mirrored, the all-reduce table.

Writes, besides report.json/report.md: each configuration's figures and HParams session,
the HParams experiment, the Custom Scalars layout, ``scaling.png`` and ``allreduce.png``
(gpudiag/scaling/tb_runs.py), ``nvml/<config>/`` (per-GPU scalars, when NVML is there).
Names: gpudiag/layout/__init__.py. The options are checked by the CLI, once,
before the run directory exists (gpudiag/scaling/options.py).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudiag import layout, nvml
from gpudiag.errors import UsageError
from gpudiag.procs.runner import ChildResult, run_child
from gpudiag.records.training import AllreduceResult, TrainingResult
from gpudiag.scaling.judge import ConfigRun, judge
from gpudiag.scaling.options import ScalingOptions, device_counts
from gpudiag.scaling.table import rich_table
from gpudiag.scaling.tb_runs import write_allreduce_tb
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import common as common_verdicts


def _usage_error_from(child: ChildResult) -> UsageError | None:
    """A child that failed on the user's input (devices asked for, data) -> exit 2."""
    if child.error_type in ("DeviceRequestError", "UsageError"):
        return UsageError(child.error or "bad input")
    return None


class _ProgressTail:
    """Follows a child's stdout for its progress lines (layout.step_line) in a thread."""

    def __init__(self, path: Path, update: Callable[[layout.StepProgress], None]) -> None:
        self.path = path
        self.update = update
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="gpudiag-progress")

    def __enter__(self) -> _ProgressTail:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        self._poll()

    def _poll(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        progress = layout.last_step(text)
        if progress is not None:
            self.update(progress)

    def _run(self) -> None:
        while not self._stop.wait(0.3):
            self._poll()


def run(session: RunSession, options: ScalingOptions, *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui) -> None:
    """Run the whole scaling diagnosis into ``session``. See the module docstring. NVML
    comes in as ``backend``, opened and closed by the caller (the CLI).

    ``options`` have passed ``gpudiag.scaling.options.check`` (the CLI checks them)."""
    backend_reason = backend.reason if isinstance(backend, nvml.NvmlUnavailable) else None
    physical: list[nvml.DeviceInfo] = []
    if not isinstance(backend, nvml.NvmlUnavailable):
        for i in range(backend.device_count()):
            try:
                physical.append(backend.device_info(i))
            except nvml.DeviceError:
                continue
    session.set("scaling_options", options.to_dict())
    progress = ui.progress()
    runs: list[ConfigRun] = []
    interrupted: KeyboardInterrupt | None = None
    with progress:
        allreduce = _run_allreduce(session, options, progress)
        if allreduce is None:
            return
        setup = allreduce.setup
        counts = device_counts(len(setup.compute_devices))
        tasks = {
            (s, n): progress.add_task(f"{s} {n} dev", total=options.workload.steps,
                                      status="waiting", start=False)
            for n in counts for s in options.strategies
        }
        try:
            for n in counts:
                for strategy in options.strategies:
                    cfg_run = _run_config(session, options, strategy, n, backend, progress,
                                          tasks[(strategy, n)])
                    runs.append(cfg_run)
                    if not cfg_run.child.ok:
                        err = _usage_error_from(cfg_run.child)
                        if err is not None:
                            raise err
        except KeyboardInterrupt as exc:  # judge what finished, then stop
            interrupted = exc
    rows, configs = judge(session, options, setup, allreduce, runs, backend_reason, physical)
    if rows:
        ui.show(rich_table(rows, configs))
    if interrupted is not None:
        raise interrupted


def _run_allreduce(session: RunSession, options: ScalingOptions,
                   progress: Any) -> AllreduceResult | None:
    """The collective probe, which is also the device check (None: it failed)."""
    task = progress.add_task("all-reduce", total=1, status="measuring")
    child = run_child("allreduce", options.allreduce_config(), run_dir=session.run_dir,
                      name=layout.ALLREDUCE_CHILD, timeout_s=options.timeout_s)
    if not child.ok or child.result is None:
        err = _usage_error_from(child)
        if err is not None:
            raise err
        progress.update(task, completed=1, status="failed")
        session.add(common_verdicts.child_failed("scaling.allreduce",
                                          "the collective bandwidth probe (and device set-up)",
                                          child))
        return None
    result = AllreduceResult.from_dict(child.result)
    session.set("devices", result.setup.to_dict())
    peak = result.peak_busbw_bytes_per_s
    progress.update(task, completed=1, status="1 device: skipped" if peak is None
                    else f"peak busbw {peak / 1e9:.2f} GB/s")
    session.set("allreduce", result.to_dict())
    table = write_allreduce_tb(session.run_dir, result)
    if table is not None:
        session.text(layout.TAG_ALLREDUCE_TABLE, table)
    return result


def _run_config(session: RunSession, options: ScalingOptions, strategy: str, n: int,
                backend: nvml.NvmlBackend | nvml.NvmlUnavailable, progress: Any,
                task: Any) -> ConfigRun:
    name = layout.config_run_name(strategy, n)
    progress.start_task(task)
    progress.update(task, status="starting")

    def update(p: layout.StepProgress) -> None:
        progress.update(task, completed=p.step, total=p.total, status=f"loss {p.loss:.3f}")

    sampler = None
    if not isinstance(backend, nvml.NvmlUnavailable):
        sampler = nvml.Sampler(backend).start()
    try:
        stdout = layout.child_path(session.run_dir, name) / layout.STDOUT_TXT
        with _ProgressTail(stdout, update):
            child = run_child("training",
                              options.training_config(strategy, n, session.run_dir / name),
                              run_dir=session.run_dir, name=name, timeout_s=options.timeout_s)
    finally:
        sampling = sampler.stop() if sampler is not None else None
    if sampling is not None:
        nvml.write_scalars(sampling, session.run_dir / layout.NVML_TB_RUN / name)
    result = TrainingResult.from_dict(child.result) if child.ok and child.result else None
    if result is not None:
        eps = result.train.examples_per_s
        progress.update(task, status=f"{eps:,.0f} ex/s" if eps else "done")
    else:
        progress.update(task, status=f"failed: {child.error_type}")
    return ConfigRun(name, strategy, n, child, sampling, result)

