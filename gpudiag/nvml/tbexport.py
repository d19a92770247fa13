"""NVML samples as TensorBoard scalars: the ``nvml/`` run of a run directory.

Per device ``i``, tags (gpudiag.layout.gpu_*_tag) ``gpu<i>/util_percent``,
``gpu<i>/memory_used_mib``, ``gpu<i>/power_w`` (the polls), ``gpu<i>/util_driver_percent``
(the driver's buffered samples) and, where the GPU offers GPM,
``gpu<i>/gpm_sm_util_percent``, ``gpu<i>/gpm_sm_occupancy_percent``,
``gpu<i>/gpm_tensor_util_percent`` and ``gpu<i>/gpm_dram_bw_util_percent`` (each over the
period before its step); the step is milliseconds since the sampler started, the wall time
the sample's. Written with gpudiag.tb's event writer (tensorboard's protos, no
TensorFlow).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from gpudiag.layout import (
    TAG_RUN_LIVE,
    gpu_dram_bw_util_tag,
    gpu_memory_used_tag,
    gpu_power_tag,
    gpu_sm_occupancy_tag,
    gpu_sm_util_tag,
    gpu_tensor_util_tag,
    gpu_util_driver_tag,
    gpu_util_tag,
)
from gpudiag.nvml.records import NOT_AVAILABLE, Sample, SamplingResult, TimedGpm, TimedUtil

if TYPE_CHECKING:
    from gpudiag.tb.writer import EventWriter


def write_samples(writer: EventWriter, samples: Iterable[Sample],
                  util_samples: Iterable[TimedUtil],
                  gpm_samples: Iterable[TimedGpm] = ()) -> set[str]:
    """Write these polls, driver samples and GPM readings into an open writer; returns the
    tags written (gpudiag.run.live writes them as they come, write_scalars all at the end)."""
    tags: set[str] = set()

    def add(tag: str, value: float, t_s: float, wall: float) -> None:
        writer.scalar(tag, value, round(t_s * 1000), wall_time=wall)
        tags.add(tag)

    for s in samples:
        st = s.state
        if st.util_gpu_percent is not NOT_AVAILABLE:
            add(gpu_util_tag(s.index), st.util_gpu_percent, s.t_s, s.wall_time_s)
        if st.memory_used_bytes is not NOT_AVAILABLE:
            add(gpu_memory_used_tag(s.index), st.memory_used_bytes / 2**20, s.t_s,
                s.wall_time_s)
        if st.power_draw_w is not NOT_AVAILABLE:
            add(gpu_power_tag(s.index), st.power_draw_w, s.t_s, s.wall_time_s)
    for u in util_samples:
        add(gpu_util_driver_tag(u.index), u.util_percent, u.t_s, u.wall_time_s)
    for g in gpm_samples:
        for tag, value in ((gpu_sm_util_tag, g.reading.sm_util_percent),
                           (gpu_sm_occupancy_tag, g.reading.sm_occupancy_percent),
                           (gpu_tensor_util_tag, g.reading.tensor_util_percent),
                           (gpu_dram_bw_util_tag, g.reading.dram_bw_util_percent)):
            if value is not NOT_AVAILABLE:
                add(tag(g.index), value, g.t_s, g.wall_time_s)
    return tags


def write_scalars(result: SamplingResult, tb_dir: Path,
                  texts: Iterable[tuple[int, str]] = ()) -> list[str]:
    """Write per-GPU utilization, memory, power and GPM as TensorBoard scalars into
    ``tb_dir``, and ``texts`` (step, line) into its Text tab (what `run` told live).

    Uses gpudiag.tb's event writer (tensorboard's protos, no TensorFlow). Returns the
    tags written.
    """
    from gpudiag.tb.writer import EventWriter

    with EventWriter(tb_dir) as writer:
        tags = write_samples(writer, result.samples, result.util_samples, result.gpm_samples)
        for step, line in texts:
            writer.text(TAG_RUN_LIVE, line, step=step)
        return sorted(tags)
