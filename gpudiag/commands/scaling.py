"""`gpudiag scaling`: train the probe on 1, 2, 4 ... devices; did more devices help?

Order of work: one child process per device count (gpudiag.procs.runner running
gpudiag/probes/scaling.py; TensorFlow's device configuration is per process), its input
and output typed records (gpudiag/records/training.py):

1. per device count (1, 2, 4 ... powers of two up to ``--max-gpus``, plus the maximum),
   one child with that many devices trains each strategy (``--strategy``, default
   towers,mirrored) one after the other, each into its TensorBoard run
   ``<run dir>/<strategy>-<n>dev/``, while this process follows the child's progress
   lines and samples NVML (when there is NVML) over each strategy's steps. The first
   child (one device) is also the device check: asking for more GPUs than exist fails
   there, before any training, with exit 2 (or, with ``--virtual-gpus N``, GPU 0 is
   split into N). The largest count's child then runs the collective bandwidth probe
   (probes/allreduce.py's sweep) on its devices;
2. verdicts (gpudiag/scaling/judge.py -> gpudiag.verdicts): every device did work
   (placement, profiler trace, NVML), scaling efficiency against the communication lower
   bound, learning, towers beside mirrored, the all-reduce table; where the time went
   (gpudiag/scaling/timing.py: report.json's ``data.scaling.timing``).

Writes, besides report.json/report.md: each configuration's figures and HParams session,
the HParams experiment, the Custom Scalars layout, ``scaling.png`` and ``allreduce.png``
(gpudiag/scaling/tb_runs.py), ``nvml/<config>/`` (per-GPU scalars, when NVML is there).
Names: gpudiag/layout/__init__.py. The options are checked by the CLI, once,
before the run directory exists (gpudiag/scaling/options.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag import layout, nvml
from gpudiag.errors import UsageError
from gpudiag.procs.runner import ChildResult, run_child
from gpudiag.records.training import AllreduceResult, CountConfig, CountResult
from gpudiag.run.every import Every
from gpudiag.scaling.judge import ConfigRun, judge
from gpudiag.scaling.options import ScalingOptions, device_counts
from gpudiag.scaling.table import rich_table
from gpudiag.scaling.tb_runs import write_allreduce_tb
from gpudiag.scaling.timing import child_timing
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import common as common_verdicts


def _usage_error_from(child: ChildResult) -> UsageError | None:
    """A child that failed on the user's input (devices asked for, data) -> exit 2."""
    if child.error_type in ("DeviceRequestError", "UsageError"):
        return UsageError(child.error or "bad input")
    return None


def step_runs(text: str) -> list[layout.StepProgress]:
    """The last progress line of each strategy a count child has started so far, in
    order: a step number that does not grow starts the next strategy's run."""
    runs: list[layout.StepProgress] = []
    for line in text.splitlines():
        p = layout.parse_step_line(line)
        if p is None:
            continue
        if runs and p.step > runs[-1].step:
            runs[-1] = p
        else:
            runs.append(p)
    return runs


class _ProgressTail:
    """Follows a count child's stdout for its progress lines (layout.step_line) in a
    thread: ``switch(k)`` once when strategy k's first line appears, ``update(k, p)`` for
    its latest line, ``done(k)`` once when its last step is printed."""

    def __init__(self, path: Path, update: Callable[[int, layout.StepProgress], None],
                 switch: Callable[[int], None], done: Callable[[int], None]) -> None:
        self.path = path
        self.update, self.switch, self.done = update, switch, done
        self._seen = 1  # the first strategy is switched to when the child starts
        self._finished: set[int] = set()
        self._every = Every(0.1, self._poll, "gpudiag-progress")

    def __enter__(self) -> _ProgressTail:
        self._every.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._every.stop()
        self._poll()

    def _poll(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return
        for k, progress in enumerate(step_runs(text)):
            if k >= self._seen:
                self._seen = k + 1
                self.switch(k)
            self.update(k, progress)
            if progress.step >= progress.total and k not in self._finished:
                self._finished.add(k)
                self.done(k)


@dataclass
class _Found:
    """What the count children gave so far: the device set-up (the largest count's once
    it ran), the counts to run, the all-reduce table, each configuration's run, the
    children's timing."""

    setup: Any = None
    counts: list[int] = dataclasses.field(default_factory=lambda: [1])
    allreduce: AllreduceResult | None = None
    runs: list[ConfigRun] = dataclasses.field(default_factory=list)
    timing: list[dict[str, Any]] = dataclasses.field(default_factory=list)


def run(session: RunSession, options: ScalingOptions, *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, ui: Ui) -> None:
    """Run the whole scaling diagnosis into ``session``. See the module docstring. NVML
    comes in as ``backend``, opened and closed by the caller (the CLI).

    ``options`` have passed ``gpudiag.scaling.options.check`` (the CLI checks them)."""
    started = time.perf_counter()
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
    found = _Found()
    interrupted: KeyboardInterrupt | None = None
    children_at = time.perf_counter()
    with progress:
        try:
            index = 0
            while index < len(found.counts):
                if not _run_count(session, options, found, index, backend, progress):
                    return
                index += 1
        except KeyboardInterrupt as exc:  # judge what finished, then stop
            interrupted = exc
    if found.setup is None:  # interrupted in the first child: nothing to judge
        raise interrupted or KeyboardInterrupt()
    parent = {"before_children_s": children_at - started,
              "children_s": time.perf_counter() - children_at}
    rows, configs = judge(session, options, found.setup, found.allreduce, found.runs,
                          backend_reason, physical,
                          {"children": found.timing, "parent": parent})
    if rows:
        ui.show(rich_table(rows, configs))
    if interrupted is not None:
        raise interrupted


def _count_config(options: ScalingOptions, session: RunSession, n: int, first: bool,
                  largest: bool) -> CountConfig:
    """The config of the child for ``n`` devices (the first one checks the largest count
    and, when it is that count, sweeps the all-reduce; so does the largest)."""
    return CountConfig(
        n_devices=n, strategies=list(options.strategies),
        logdirs=[str(session.run_dir / layout.config_run_name(s, n))
                 for s in options.strategies],
        workload=options.workload, virtual_gpus=options.virtual_gpus,
        memory_limit_mb=options.memory_limit_mb, check_max=first,
        max_devices=options.max_gpus,
        allreduce=options.allreduce_config() if first or largest else None)


def _run_count(session: RunSession, options: ScalingOptions, found: _Found, index: int,
               backend: nvml.NvmlBackend | nvml.NvmlUnavailable, progress: Any) -> bool:
    """The child for ``found.counts[index]`` devices, its configurations into ``found``;
    False: the first child failed, so the device count is unknown and nothing can go on."""
    n, first = found.counts[index], index == 0
    tasks = {s: progress.add_task(f"{s} {n} dev", total=options.workload.steps,
                                  status="waiting", start=False) for s in options.strategies}
    name = layout.count_child_name(n)
    spawned_at = time.time()
    config = _count_config(options, session, n, first, not first and n == found.counts[-1])
    child, samplings = _watch(session, name, options, n, backend, progress, tasks, config)
    result = CountResult.from_dict(child.result) if child.ok and child.result else None
    found.timing.append(child_timing(name, n, child, spawned_at, result))
    if result is None:
        err = _usage_error_from(child)
        if err is not None:
            raise err
        for s in options.strategies:
            progress.update(tasks[s], status=f"failed: {child.error_type}")
            found.runs.append(ConfigRun(layout.config_run_name(s, n), s, n, child,
                                        samplings.get(s), None))
        if first:
            session.add(common_verdicts.child_failed(
                "scaling.devices", "the first training child (and the device check)", child))
        return not first
    if first:
        found.counts = device_counts(result.max_devices or 1)
    if first or n == found.counts[-1]:
        found.setup = result.setup
        session.set("devices", result.setup.to_dict())
    if n == found.counts[-1]:
        _allreduce(session, found, child, result, progress)
    for o in result.outcomes:
        cfg_child = child if o.result is not None else dataclasses.replace(
            child, ok=False, error=o.error, error_type=o.error_type)
        eps = o.result.train.examples_per_s if o.result is not None else None
        progress.update(tasks[o.strategy], status=f"{eps:,.0f} ex/s" if eps
                        else "done" if o.result is not None else f"failed: {o.error_type}")
        found.runs.append(ConfigRun(layout.config_run_name(o.strategy, n), o.strategy, n,
                                    cfg_child, samplings.get(o.strategy), o.result))
    return True


def _watch(session: RunSession, name: str, options: ScalingOptions, n: int,
           backend: nvml.NvmlBackend | nvml.NvmlUnavailable, progress: Any,
           tasks: dict[str, Any], config: CountConfig
           ) -> tuple[ChildResult, dict[str, nvml.SamplingResult]]:
    """Run a count child, following its progress; with NVML, one sampler per strategy,
    from its first progress line (the first strategy's: from the child's start) to its
    last step."""
    strategies = options.strategies
    samplers: dict[int, Any] = {}
    samplings: dict[str, nvml.SamplingResult] = {}

    def stop(k: int) -> None:
        sampler = samplers.pop(k, None)
        if sampler is not None:
            samplings[strategies[k]] = sampler.stop()

    def switch(k: int) -> None:
        if k >= len(strategies):
            return
        if k > 0:
            stop(k - 1)
        progress.start_task(tasks[strategies[k]])
        if not isinstance(backend, nvml.NvmlUnavailable) and strategies[k] not in samplings:
            samplers[k] = nvml.Sampler(backend).start()

    def update(k: int, p: layout.StepProgress) -> None:
        if k < len(strategies):
            progress.update(tasks[strategies[k]], completed=p.step, total=p.total,
                            status=f"loss {p.loss:.3f}")

    stdout = layout.child_path(session.run_dir, name) / layout.STDOUT_TXT
    switch(0)
    progress.update(tasks[strategies[0]], status="starting")
    try:
        with _ProgressTail(stdout, update, switch, stop):
            child = run_child("scaling", config, run_dir=session.run_dir, name=name,
                              timeout_s=options.timeout_s * len(strategies))
    finally:
        for k in list(samplers):
            stop(k)
    for strategy, sampling in samplings.items():
        nvml.write_scalars(sampling, session.run_dir / layout.NVML_TB_RUN
                           / layout.config_run_name(strategy, n))
    return child, samplings


def _allreduce(session: RunSession, found: _Found, child: ChildResult, result: CountResult,
               progress: Any) -> None:
    """The largest count's all-reduce table into the report (or why there is none)."""
    task = progress.add_task("all-reduce", total=1, status="measuring")
    if result.allreduce is None:
        progress.update(task, completed=1, status="failed")
        error = result.allreduce_error or "no result"
        failed = dataclasses.replace(child, ok=False, error=error,
                                     error_type=error.split(":")[0])
        session.add(common_verdicts.child_failed("scaling.allreduce",
                                                 "the collective bandwidth probe", failed))
        return
    found.allreduce = allreduce = result.allreduce
    peak = allreduce.peak_busbw_bytes_per_s
    progress.update(task, completed=1, status="1 device: skipped" if peak is None
                    else f"peak busbw {peak / 1e9:.2f} GB/s")
    session.set("allreduce", allreduce.to_dict())
    table = write_allreduce_tb(session.run_dir, allreduce)
    if table is not None:
        session.text(layout.TAG_ALLREDUCE_TABLE, table)
