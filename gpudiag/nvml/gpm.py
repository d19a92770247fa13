"""GPM (GPU performance monitoring) through pynvml: SM utilization, SM occupancy, tensor-core
and DRAM bandwidth utilization, on GPUs that offer it (Hopper and later).

NVML's ``utilization.gpu`` is the share of time *any* kernel ran: one busy SM out of 132
reads 100 %. GPM says how much of the GPU the kernels used. It works on two samples: take
one (``nvmlGpmSampleGet``), take another later, and ``nvmlGpmMetricsGet`` computes each
metric over the time between them. :class:`PynvmlGpm` keeps two samples per device and
swaps them, so every reading covers the time since the previous one.

Written against nvidia-ml-py's pynvml (13.x; GPM came in 11.525): ``nvmlGpmQueryDeviceSupport``
(``c_nvmlGpmSupport_t.isSupportedDevice``), ``nvmlGpmSampleAlloc``/``nvmlGpmSampleFree``,
``nvmlGpmSampleGet(handle, sample)``, and ``nvmlGpmMetricsGet`` on a
``c_nvmlGpmMetricsGet_t`` (``version`` NVML_GPM_METRICS_GET_VERSION, ``numMetrics``,
``sample1``, ``sample2``, ``metrics[i].metricId`` in; ``metrics[i].nvmlReturn`` and
``.value`` out). Nothing here raises: GPM that is unsupported or fails is a
:class:`GpmUnavailable` with the reason, and the device's other readings go on.
No GPU has run this code in gpudiag's tests (the fake backend stands in for it there).
"""

from __future__ import annotations

import contextlib
from types import ModuleType
from typing import Any, Final

from gpudiag.nvml.records import NOT_AVAILABLE, GpmReading, GpmUnavailable, NotAvailable

#: GpmReading's fields and the pynvml constant each is read from.
METRICS: Final = (
    ("sm_util_percent", "NVML_GPM_METRIC_SM_UTIL"),
    ("sm_occupancy_percent", "NVML_GPM_METRIC_SM_OCCUPANCY"),
    ("tensor_util_percent", "NVML_GPM_METRIC_ANY_TENSOR_UTIL"),
    ("dram_bw_util_percent", "NVML_GPM_METRIC_DRAM_BW_UTIL"),
)


class PynvmlGpm:
    """GPM readings of the devices of one initialised pynvml."""

    def __init__(self, nv: ModuleType) -> None:
        self._nv = nv
        self._samples: dict[int, list[Any]] = {}  # index -> [previous, next]

    def start(self, index: int, handle: Any) -> GpmUnavailable | None:
        """Check support and take the first sample; None when GPM works on this device."""
        nv = self._nv
        if not hasattr(nv, "nvmlGpmQueryDeviceSupport"):
            return GpmUnavailable("these NVML bindings have no GPM (nvidia-ml-py 11.525 or "
                                  "later has it)")
        try:
            support = nv.nvmlGpmQueryDeviceSupport(handle)
            if not support.isSupportedDevice:
                return GpmUnavailable("this GPU does not offer GPM metrics "
                                      "(nvmlGpmQueryDeviceSupport: Hopper and later do)")
            pair = [nv.nvmlGpmSampleAlloc(), nv.nvmlGpmSampleAlloc()]
            self._samples[index] = pair
            nv.nvmlGpmSampleGet(handle, pair[0])
        except nv.NVMLError as exc:
            self._free(index)
            return GpmUnavailable(f"GPM failed at start: {exc}")
        return None

    def read(self, index: int, handle: Any) -> GpmReading | GpmUnavailable:
        """The metrics since the previous reading (or start)."""
        nv = self._nv
        pair = self._samples.get(index)
        if pair is None:
            return GpmUnavailable("GPM was not started on this device")
        try:
            nv.nvmlGpmSampleGet(handle, pair[1])
            got = nv.c_nvmlGpmMetricsGet_t()
            got.version = nv.NVML_GPM_METRICS_GET_VERSION
            got.numMetrics = len(METRICS)
            got.sample1, got.sample2 = pair[0], pair[1]
            for i, (_, constant) in enumerate(METRICS):
                got.metrics[i].metricId = getattr(nv, constant)
            nv.nvmlGpmMetricsGet(got)
        except nv.NVMLError as exc:
            self._free(index)
            return GpmUnavailable(f"GPM failed: {exc}")
        pair.reverse()  # the sample just taken starts the next period

        def value(i: int) -> float | NotAvailable:
            metric = got.metrics[i]
            return float(metric.value) if metric.nvmlReturn == nv.NVML_SUCCESS else NOT_AVAILABLE

        return GpmReading(**{name: value(i) for i, (name, _) in enumerate(METRICS)})

    def _free(self, index: int) -> None:
        for sample in self._samples.pop(index, []):
            with contextlib.suppress(self._nv.NVMLError):
                self._nv.nvmlGpmSampleFree(sample)

    def close(self) -> None:
        for index in list(self._samples):
            self._free(index)
