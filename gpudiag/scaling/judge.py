"""From the children's typed results to findings: `gpudiag scaling`'s verdict inputs.

The verdict functions (gpudiag.verdicts) take plain data; this module is where the
typed records (gpudiag/records/training.py) become those dicts: a throughput point per
configuration (with its trace's input waits and per-device busy fractions), a learning
row per configuration, the all-reduce table. It also reads each configuration's profiler
trace (gpudiag.readers.traces) and cross-checks its NVML samples, then records the table, the
per-configuration data and what the parent writes for TensorBoard (table.py, tb_runs.py:
each configuration's figures and HParams session, exactly the report's numbers).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpudiag import nvml
from gpudiag.layout import TAG_SCALING_TABLE
from gpudiag.markdown import markdown_table
from gpudiag.procs.runner import ChildResult
from gpudiag.readers import traces
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import AllreduceResult, TrainingResult
from gpudiag.report import Finding
from gpudiag.scaling import whyslow
from gpudiag.scaling.options import ScalingOptions
from gpudiag.scaling.table import TABLE_HEADERS, table
from gpudiag.scaling.tb_runs import write_scaling_tb
from gpudiag.session import RunSession
from gpudiag.verdicts import common as common_verdicts
from gpudiag.verdicts import gpu_use as gpu_verdicts
from gpudiag.verdicts import scaling as scaling_verdicts
from gpudiag.verdicts import scaling_learning
from gpudiag.verdicts.scaling import ThroughputPoint
from gpudiag.verdicts.scaling_learning import LearningRow

NVML_IDLE_THRESHOLD_PERCENT = nvml.DEFAULT_ACTIVE_THRESHOLD_PERCENT
KERAS_PLACEMENT_REASON = "model.fit builds its own step function, which gpudiag does not trace"


@dataclass(frozen=True)
class ConfigRun:
    """One training configuration's outcome as the parent saw it."""

    name: str
    strategy: str
    n_devices: int
    child: ChildResult
    sampling: nvml.SamplingResult | None
    result: TrainingResult | None  # the child's result; None when it failed


def expected_nvml_indices(setup: DeviceSetup,
                          physical: Sequence[nvml.DeviceInfo]) -> list[int] | None:
    """NVML indices of the GPUs a configuration's child used (None: cannot tell)."""
    if setup.kind not in ("gpu", "virtual-gpu"):
        return None
    if setup.kind == "virtual-gpu":
        details = [{"name": "/device:GPU:0", "physical_index": 0}]
    else:
        details = [{"name": d, "physical_index": i} for i, d in enumerate(setup.compute_devices)]
    mapped = nvml.map_logical_to_physical(details, setup.cuda_visible_devices, list(physical))
    indices = [m.nvml_index for m in mapped]
    if any(i is None for i in indices):
        return None
    return sorted({int(i) for i in indices if i is not None})


def nvml_finding(name: str, sampling: nvml.SamplingResult | None, setup: DeviceSetup,
                 backend_reason: str | None,
                 physical: Sequence[nvml.DeviceInfo]) -> Finding | None:
    """The NVML cross-check of configuration ``name`` (its child's device ``setup``);
    None when NVML was absent (one skip finding for the whole run says so)."""
    if backend_reason is not None or sampling is None:
        return None
    expected = expected_nvml_indices(setup, physical)
    return gpu_verdicts.every_gpu_used(
        sampling.summaries, NVML_IDLE_THRESHOLD_PERCENT, expected_indices=expected,
        check_id=f"scaling.nvml.{name}",
    )


def trace_summary(result: TrainingResult) -> tuple[traces.TraceSummary | None, str | None]:
    """The configuration's profiler trace read back, or why there is none."""
    path, reason = whyslow.profile_trace(result)
    if path is None:
        return None, reason
    try:
        return traces.summarize(path, result.train.op_devices, result.train.devices), None
    except traces.TraceError as exc:
        return None, str(exc)


def throughput_point(run: ConfigRun, result: TrainingResult,
                     summary: traces.TraceSummary | None) -> ThroughputPoint:
    """verdicts.scaling_rows' input for one configuration."""
    busy = ({d: s / summary.window_s for d, s in summary.busy_by_device().items()}
            if summary and summary.window_s > 0 else None)
    return ThroughputPoint(
        strategy=run.strategy, n_devices=run.n_devices, name=run.name,
        examples_per_s=result.train.examples_per_s, step_s=result.train.step_s_median,
        input_wait_fraction=summary.input_wait_fraction if summary else None,
        trace_busy_fraction=busy,
        timed_step_s=tuple(result.train.step_s[i] for i in result.train.timed_steps
                           if 0 <= i < len(result.train.step_s)))


def learning_row(run: ConfigRun, result: TrainingResult, learning_rate: float) -> LearningRow:
    """verdicts.learning's input for one configuration."""
    t = result.train
    return LearningRow(
        name=run.name, num_classes=result.data.num_classes, steps=t.steps,
        learning_rate=learning_rate, initial_loss=t.losses[0] if t.losses else None,
        final_loss=t.final_loss, final_accuracy=t.final_accuracy,
        eval_accuracy=t.eval_accuracy, eval_accuracy_ema=t.eval_accuracy_ema)


def quartiles(values: Sequence[float]) -> tuple[float, float]:
    """First and third quartile (statistics.quantiles, n=4; one value: itself twice)."""
    if len(values) < 2:
        return (values[0], values[0]) if values else (math.nan, math.nan)
    q1, _, q3 = statistics.quantiles(values, n=4)
    return q1, q3


def rate_quartiles(result: TrainingResult) -> list[float] | None:
    """The timed steps' examples/s, first and third quartile: the spread around the
    median the efficiency rests on (None: fewer than two timed steps)."""
    t = result.train
    rates = [t.global_batch / t.step_s[i] for i in t.timed_steps if t.step_s[i] > 0]
    return list(quartiles(rates)) if len(rates) >= 2 else None


def config_data(run: ConfigRun, result: TrainingResult, summary: traces.TraceSummary | None,
                reason: str | None, tb_run: Path) -> dict[str, Any]:
    """One configuration in the report's ``data.scaling.configs``."""
    t = result.train
    return {
        "strategy": run.strategy, "n_devices": run.n_devices, "devices": t.devices,
        "global_batch": t.global_batch, "steps": t.steps, "examples_per_s": t.examples_per_s,
        "step_s_median": t.step_s_median, "timed_steps": len(t.timed_steps),
        "examples_per_s_quartiles": rate_quartiles(result),
        "final_loss": t.final_loss, "final_accuracy": t.final_accuracy,
        "eval_accuracy": t.eval_accuracy, "eval_accuracy_ema": t.eval_accuracy_ema,
        "ops_by_device": t.ops_by_device, "checkpoint": t.checkpoint_path,
        "tensorboard_run": str(tb_run),
        "trace": summary.to_dict() if summary else {"reason": reason},
        "nvml": run.sampling.to_dict() if run.sampling else None,
        "child_duration_s": run.child.duration_s,
    }


def judge(session: RunSession, options: ScalingOptions, setup: DeviceSetup,
          allreduce: AllreduceResult | None, runs: Sequence[ConfigRun],
          backend_reason: str | None, physical: Sequence[nvml.DeviceInfo],
          timing: dict[str, Any] | None = None) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Every finding of the run; returns the scaling rows and per-configuration data.
    ``timing``: the children's and the parent's phases so far (gpudiag.scaling.timing),
    completed here with the verdicts' and TensorBoard's and recorded as
    ``data.scaling.timing``."""
    verdicts_at = time.perf_counter()
    points: list[ThroughputPoint] = []
    learning_rows: list[LearningRow] = []
    configs: dict[str, Any] = {}
    gradient_bytes = 0
    for r in runs:
        if r.result is None:
            session.add(common_verdicts.child_failed(f"scaling.run.{r.name}", f"training {r.name}",
                                              r.child))
            continue
        result = r.result
        gradient_bytes = result.gradient_bytes
        summary, reason = trace_summary(result)
        trace_busy = ({d: b for d, b in summary.busy_by_device().items()
                       if d in result.train.devices} if summary else None)
        session.add(scaling_verdicts.device_work(
            r.name, result.train.devices, result.train.ops_by_device or None, trace_busy,
            trace_window_s=summary.window_s if summary else None, trace_reason=reason,
            placement_reason=KERAS_PLACEMENT_REASON if r.strategy == "keras" else None))
        finding = nvml_finding(r.name, r.sampling, result.setup, backend_reason, physical)
        if finding is not None:
            session.add(finding)
        points.append(throughput_point(r, result, summary))
        learning_rows.append(learning_row(r, result, options.workload.learning_rate))
        configs[r.name] = config_data(r, result, summary, reason, session.run_dir / r.name)
    if backend_reason is not None:
        session.add(gpu_verdicts.every_gpu_used([], NVML_IDLE_THRESHOLD_PERCENT,
                                            nvml_unavailable_reason=backend_reason,
                                            check_id="scaling.nvml"))
    typed_rows = scaling_verdicts.scaling_rows(points)
    busbw = allreduce.peak_busbw_bytes_per_s if allreduce else None
    for strategy in options.strategies:
        session.add(scaling_verdicts.scaling_efficiency(
            strategy, typed_rows, setup.kind, gradient_bytes=gradient_bytes,
            busbw_bytes_per_s=busbw,
            batch_per_device=options.workload.batch_per_device,
            variables_on=options.workload.variables_on if strategy == "towers" else "mirrored"))
    session.add(scaling_learning.learning(learning_rows))
    if {"towers", "mirrored"} <= set(options.strategies):
        session.add(scaling_verdicts.towers_vs_mirrored(typed_rows))
    if allreduce is not None:
        session.add(scaling_verdicts.allreduce_bandwidth(allreduce, setup.kind))
    # why each configuration is as fast as it is, after whether scaling helped
    for finding in whyslow.findings([(r.name, r.strategy, r.n_devices, r.result,
                                      r.child.error_type) for r in runs]):
        session.add(finding)
    # the report's rows, from here on plain data (the step times stay in the configs)
    rows = [{k: v for k, v in asdict(r).items() if k != "timed_step_s"} for r in typed_rows]
    table_rows = table(rows, configs)
    session.text(TAG_SCALING_TABLE, markdown_table(TABLE_HEADERS, table_rows))
    tb_at = time.perf_counter()
    write_scaling_tb(session.run_dir, rows, configs, runs, setup.kind, options.workload)
    end = time.perf_counter()
    timing = dict(timing or {})
    parent = {**(timing.get("parent") or {}), "verdicts_s": tb_at - verdicts_at,
              "tensorboard_s": end - tb_at}
    parent["total_s"] = sum(parent.get(k, 0.0) for k in ("before_children_s", "children_s",
                                                         "verdicts_s", "tensorboard_s"))
    timing["parent"] = parent
    session.set("scaling", {"device_kind": setup.kind, "gradient_bytes": gradient_bytes,
                            "peak_busbw_bytes_per_s": busbw, "rows": rows, "configs": configs,
                            "timing": timing})
    return rows, configs
