"""GPM (SM utilization, occupancy; Hopper and later) beside NVML's utilization: the real
pynvml backend's GPM code against pynvml's own structures, the sampler and summaries through
the fake backend's scenarios, the scalars, and `gpudiag monitor` end to end."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import fake_nvml
import pytest
from fake_clock import FakeClock
from fake_nvml import NO_GPM_REASON, FakeBackend, FakeDevice
from helpers import read_scalars
from test_nvml import clocked, run_sampler

from gpudiag import nvml
from gpudiag.nvml.gpm import PynvmlGpm

pynvml = pytest.importorskip("pynvml")


# --------------------------------------------------------------------------- the real code


class GpmDriver:
    """NVML's GPM entry points as pynvml exposes them, over pynvml's own ctypes structures
    (c_nvmlGpmMetricsGet_t, c_nvmlGpmSupport_t): what PynvmlGpm reads and writes there is
    checked against the installed bindings. pynvml itself is not patched."""

    def __init__(self, supported: bool = True, fail_at_read: int | None = None) -> None:
        self.supported, self.fail_at_read = supported, fail_at_read
        self.allocated: list[Any] = []
        self.freed: list[Any] = []
        self.reads = 0
        self.seen: list[tuple[int, ...]] = []

    def module(self) -> SimpleNamespace:
        names = {n: getattr(pynvml, n) for n in dir(pynvml)
                 if n.startswith(("NVML_", "c_nvml", "NVMLError", "struct_c_nvml"))}
        return SimpleNamespace(**names, nvmlGpmQueryDeviceSupport=self.support,
                               nvmlGpmSampleAlloc=self.alloc, nvmlGpmSampleFree=self.free,
                               nvmlGpmSampleGet=self.sample_get,
                               nvmlGpmMetricsGet=self.metrics_get)

    def support(self, handle: object) -> Any:
        out = pynvml.c_nvmlGpmSupport_t()
        out.isSupportedDevice = int(self.supported)
        return out

    def alloc(self) -> object:
        sample = pynvml.c_nvmlGpmSample_t()  # what nvmlGpmSampleAlloc returns
        self.allocated.append(sample)
        return sample

    def free(self, sample: object) -> None:
        self.freed.append(sample)

    def sample_get(self, handle: object, sample: object) -> object:
        return sample

    def metrics_get(self, got: Any) -> Any:
        self.reads += 1
        if self.reads == self.fail_at_read:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_UNKNOWN)
        assert got.version == pynvml.NVML_GPM_METRICS_GET_VERSION
        ids = tuple(got.metrics[i].metricId for i in range(got.numMetrics))
        self.seen.append(ids)
        values = {pynvml.NVML_GPM_METRIC_SM_UTIL: 3.0, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY: 1.5,
                  pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL: 0.0}
        for i, metric_id in enumerate(ids):
            if metric_id in values:
                got.metrics[i].value = values[metric_id]
                got.metrics[i].nvmlReturn = pynvml.NVML_SUCCESS
            else:  # DRAM bandwidth: this "GPU" does not give it
                got.metrics[i].nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
        return got


def test_real_gpm_code_reads_the_four_metrics_from_pynvml_structures() -> None:
    driver = GpmDriver()
    gpm = PynvmlGpm(driver.module())  # type: ignore[arg-type]
    assert gpm.start(0, "handle") is None
    first, second = gpm.read(0, "handle"), gpm.read(0, "handle")
    assert first == second == nvml.GpmReading(3.0, 1.5, 0.0, nvml.NOT_AVAILABLE)
    assert driver.seen[0] == (pynvml.NVML_GPM_METRIC_SM_UTIL, pynvml.NVML_GPM_METRIC_SM_OCCUPANCY,
                              pynvml.NVML_GPM_METRIC_ANY_TENSOR_UTIL,
                              pynvml.NVML_GPM_METRIC_DRAM_BW_UTIL)
    assert len(driver.allocated) == 2  # two samples per device, swapped, never re-allocated
    gpm.close()
    assert sorted(map(id, driver.freed)) == sorted(map(id, driver.allocated))


def test_real_gpm_code_says_why_when_unsupported_or_failing() -> None:
    unsupported = PynvmlGpm(GpmDriver(supported=False).module())  # type: ignore[arg-type]
    assert unsupported.start(0, "h") == nvml.GpmUnavailable(NO_GPM_REASON)
    driver = GpmDriver(fail_at_read=2)
    gpm = PynvmlGpm(driver.module())  # type: ignore[arg-type]
    assert gpm.start(0, "h") is None
    assert isinstance(gpm.read(0, "h"), nvml.GpmReading)
    failed = gpm.read(0, "h")
    assert isinstance(failed, nvml.GpmUnavailable) and failed.reason.startswith("GPM failed:")
    assert len(driver.freed) == 2  # released at once
    assert gpm.read(0, "h") == nvml.GpmUnavailable("GPM was not started on this device")
    old = SimpleNamespace(NVMLError=pynvml.NVMLError)  # bindings older than GPM
    assert "no GPM" in PynvmlGpm(old).start(0, "h").reason  # type: ignore[arg-type, union-attr]


# --------------------------------------------------------------------------- sampler, summary


def test_sampler_reads_gpm_beside_utilization() -> None:
    result = run_sampler(clocked(fake_nvml.small_kernels), 1.0, interval_s=0.25)
    s = result.summary(0)
    # polls at 0, .25, .5, .75, 1.0 and on stop; the one at 0 is too soon after gpm_start
    assert [round(g.t_s, 2) for g in result.gpm_samples] == [0.25, 0.5, 0.75, 1.0]
    assert sum(g.span_s for g in result.gpm_samples) == pytest.approx(1.0)
    assert s.gpm_reading_count == 4 and s.gpm_unavailable_reason is None
    assert s.util_mean_percent == 100.0
    assert (s.sm_util_mean_percent, s.sm_occupancy_mean_percent, s.tensor_util_mean_percent,
            s.dram_bw_util_mean_percent) == (3.0, 1.5, 0.0, 2.0)
    assert result.to_dict(with_samples=True)["gpm_samples"][0]["reading"]["sm_util_percent"] == 3


def test_gpu_without_gpm_says_why_and_is_still_sampled() -> None:
    result = run_sampler(clocked(fake_nvml.busy, n=1), 0.5, interval_s=0.25)
    s = result.summary(0)
    assert result.gpm_samples == () and s.gpm_reading_count == 0
    assert s.gpm_unavailable_reason == NO_GPM_REASON
    assert s.sm_util_mean_percent is nvml.NOT_AVAILABLE
    assert s.util_mean_percent == 90.0 and s.poll_count == 4


def test_gpm_failing_mid_run_keeps_the_readings_before_and_the_device() -> None:
    class Failing(FakeBackend):
        def gpm_read(self, index: int) -> nvml.GpmReading | nvml.GpmUnavailable:
            self.calls["gpm_asked"] += 1
            if self._t() >= 0.6:
                return nvml.GpmUnavailable("GPM failed: Unknown Error")
            return super().gpm_read(index)

    gpm = {"sm_util_percent": fake_nvml.const(40.0)}
    backend = Failing([FakeDevice(gpm=gpm)], clock=FakeClock(parties=2))
    result = run_sampler(backend, 1.0, interval_s=0.25)
    s = result.summary(0)
    assert s.gpm_reading_count == 2 and s.sm_util_mean_percent == 40.0
    assert s.sm_occupancy_mean_percent is nvml.NOT_AVAILABLE  # this GPU does not give it
    assert s.gpm_unavailable_reason == "GPM failed: Unknown Error (at 0.8 s)"
    assert s.error is None and s.poll_count == 6  # the device itself kept reporting
    assert backend.calls["gpm_asked"] == 3  # and GPM was not asked again


def test_gpm_scalars_round_trip(tmp_path: Path) -> None:
    result = run_sampler(clocked(fake_nvml.small_kernels), 0.5, interval_s=0.25)
    tags = nvml.write_scalars(result, tmp_path / "nvml")
    stored = read_scalars(tmp_path / "nvml")
    assert {"gpu0/gpm_sm_util_percent", "gpu0/gpm_sm_occupancy_percent",
            "gpu0/gpm_tensor_util_percent", "gpu0/gpm_dram_bw_util_percent"} <= set(tags)
    assert [e.value for e in stored["gpu0/gpm_sm_util_percent"]] == pytest.approx([3.0, 3.0])
    plain = run_sampler(clocked(fake_nvml.busy, n=1), 0.5, interval_s=0.25)
    assert not [t for t in nvml.write_scalars(plain, tmp_path / "plain") if "gpm" in t]
