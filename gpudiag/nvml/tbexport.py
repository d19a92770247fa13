"""NVML samples as TensorBoard scalars: the ``nvml/`` run of a run directory.

Per device ``i``, tags ``gpu<i>/util_percent``, ``gpu<i>/memory_used_mib``,
``gpu<i>/power_w`` (the polls) and ``gpu<i>/util_driver_percent`` (the driver's
buffered samples); the step is milliseconds since the sampler started, the wall time the
sample's. Written with gpudiag.tb's event writer (tensorboard's protos, no TensorFlow).
"""

from __future__ import annotations

from pathlib import Path

from gpudiag.nvml.records import NOT_AVAILABLE, SamplingResult

#: Scalar tags written per device under the run directory's ``nvml/`` TensorBoard run.
#: Step is milliseconds since the sampler started; wall time is the sample's.
TAG_UTIL = "gpu{index}/util_percent"
TAG_UTIL_FINE = "gpu{index}/util_driver_percent"
TAG_MEMORY_USED = "gpu{index}/memory_used_mib"
TAG_POWER = "gpu{index}/power_w"


def write_scalars(result: SamplingResult, tb_dir: Path) -> list[str]:
    """Write per-GPU utilization, memory and power as TensorBoard scalars into ``tb_dir``.

    Uses gpudiag.tb's event writer (tensorboard's protos, no TensorFlow). Returns the
    tags written.
    """
    from gpudiag.tb import EventWriter

    tags: set[str] = set()
    with EventWriter(tb_dir) as writer:

        def add(tag: str, value: float, t_s: float, wall: float) -> None:
            writer.scalar(tag, value, round(t_s * 1000), wall_time=wall)
            tags.add(tag)

        for s in result.samples:
            st = s.state
            if st.util_gpu_percent is not NOT_AVAILABLE:
                add(TAG_UTIL.format(index=s.index), st.util_gpu_percent, s.t_s, s.wall_time_s)
            if st.memory_used_bytes is not NOT_AVAILABLE:
                add(
                    TAG_MEMORY_USED.format(index=s.index),
                    st.memory_used_bytes / 2**20,
                    s.t_s,
                    s.wall_time_s,
                )
            if st.power_draw_w is not NOT_AVAILABLE:
                add(TAG_POWER.format(index=s.index), st.power_draw_w, s.t_s, s.wall_time_s)
        for u in result.util_samples:
            add(TAG_UTIL_FINE.format(index=u.index), u.util_percent, u.t_s, u.wall_time_s)
    return sorted(tags)
