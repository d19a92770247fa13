"""The Custom Scalars dashboard's charts: one chart per question, across runs.

A chart shows every (run, tag) whose tag matches one of its regexes, so one chart puts
every configuration (towers and mirrored) or every GPU on the same axes. Each command
writes the categories it has data for into its report run (gpudiag.tb.writer.EventWriter.
custom_scalars); TensorBoard merges the layouts of all runs, equal charts once, so two
scaling runs in one logdir still give one set of charts. Tags: gpudiag.layout.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from gpudiag import layout
from gpudiag.tb.writer import Chart, ChartGroup, EventWriter


def _exact(*tags: str) -> tuple[str, ...]:
    return tuple(f"^{re.escape(t)}$" for t in tags)


SCALING = "scaling: did more devices help, did every device work, did it learn?"
GPUS = "GPUs (NVML): was every GPU busy?"
MEMORY = "memory: TensorFlow's view and NVML's, per mode"


def nvml_charts() -> ChartGroup:
    """Per-GPU NVML scalars of a run on one chart (monitor's nvml/, scaling's nvml/<config>)."""
    return ChartGroup(GPUS, (
        Chart("utilization % per GPU (NVML)", (layout.gpu_util_tag.pattern,)),
        Chart("memory used MiB per GPU (NVML)", (layout.gpu_memory_used_tag.pattern,)),
        Chart("GPM SM utilization and occupancy % per GPU (Hopper and later)",
              (layout.gpu_sm_util_tag.pattern, layout.gpu_sm_occupancy_tag.pattern)),
    ))


def scaling_charts(*, nvml: bool) -> list[ChartGroup]:
    """`gpudiag scaling`'s charts (the NVML ones only when NVML was sampled)."""
    groups = [ChartGroup(SCALING, (
        Chart("examples/s per step, every configuration",
              _exact(layout.TAG_TRAIN_EXAMPLES_PER_S)),
        Chart("loss, every configuration", _exact(layout.TAG_TRAIN_LOSS)),
        Chart("loss of each device's slice (towers, replicas)",
              (layout.tower_loss_tag.pattern, layout.replica_loss_tag.pattern)),
        Chart("global norms: averaged gradients, moving average of the weights",
              _exact(layout.TAG_NORM_GRADIENTS, layout.TAG_NORM_EMA)),
    ))]
    if nvml:
        groups.append(nvml_charts())
    return groups


def memory_charts() -> list[ChartGroup]:
    """`gpudiag memory`'s chart: TensorFlow's and NVML's memory of every mode together."""
    return [ChartGroup(MEMORY, (
        Chart("TensorFlow vs NVML memory (MiB) per allocation step, every mode",
              _exact(layout.TAG_MEMORY_TF_CURRENT, layout.TAG_MEMORY_TF_PEAK,
                     layout.TAG_MEMORY_NVML_PROCESS, layout.TAG_MEMORY_NVML_DEVICE_USED)),
    ))]


def write_charts(run_dir: Path, groups: Sequence[ChartGroup]) -> None:
    """The layout of ``groups`` into the report run of ``run_dir``."""
    with EventWriter(run_dir / layout.REPORT_TB_RUN) as w:
        w.custom_scalars(groups)
