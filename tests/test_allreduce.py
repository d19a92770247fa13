"""The collective bandwidth probe: nccl-tests' arithmetic, and a real run in a child."""

from __future__ import annotations

import pytest

from gpudiag.probes.allreduce import bus_bandwidth
from gpudiag.procs.runner import run_child
from gpudiag.records.training import (
    DEFAULT_SIZES_BYTES,
    AllreduceConfig,
    AllreduceResult,
    allreduce_sizes,
)
from gpudiag.scaling.options import ScalingOptions, device_counts

MIB = 1 << 20


def test_bus_bandwidth_is_nccl_tests_factor() -> None:
    assert bus_bandwidth(10e9, 2) == pytest.approx(10e9)  # 2(n-1)/n = 1
    assert bus_bandwidth(10e9, 4) == pytest.approx(15e9)  # 1.5
    assert bus_bandwidth(10e9, 8) == pytest.approx(17.5e9)  # 1.75
    assert bus_bandwidth(10e9, 1) == 0.0


def test_default_sizes_are_1_to_256_mib_doubling() -> None:
    assert allreduce_sizes(1, 256) == DEFAULT_SIZES_BYTES
    assert ScalingOptions().allreduce_config().sizes_bytes == DEFAULT_SIZES_BYTES
    assert [s // MIB for s in DEFAULT_SIZES_BYTES] == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert allreduce_sizes(0.5, 2) == [MIB // 2, MIB, 2 * MIB]


def test_device_counts_are_powers_of_two_plus_the_maximum() -> None:
    assert device_counts(1) == [1]
    assert device_counts(4) == [1, 2, 4]
    assert device_counts(6) == [1, 2, 4, 6]
    assert device_counts(8) == [1, 2, 4, 8]


@pytest.mark.slow
def test_allreduce_probe_in_a_child_on_virtual_cpu_devices(tmp_path) -> None:
    sizes = [MIB, 4 * MIB]
    child = run_child("allreduce", AllreduceConfig(n_devices=3, sizes_bytes=sizes, max_iters=4),
                      run_dir=tmp_path, name="allreduce", timeout_s=180)
    assert child.ok and child.result is not None, child.stderr_tail
    result = AllreduceResult.from_dict(child.result)
    assert result.setup.kind == "virtual-cpu"
    assert result.setup.compute_devices == ["/device:CPU:1", "/device:CPU:2", "/device:CPU:3"]
    assert result.cross_device_ops == "ReductionToOneDevice"
    assert [r.size_bytes for r in result.rows] == sizes
    for r in result.rows:
        assert 2 <= r.iters <= 4
        assert r.time_s > 0
        assert r.algbw_bytes_per_s == pytest.approx(r.size_bytes / r.time_s)
        assert r.busbw_bytes_per_s == pytest.approx(r.algbw_bytes_per_s * 4 / 3)
    assert result.peak_busbw_bytes_per_s == max(r.busbw_bytes_per_s for r in result.rows)


@pytest.mark.slow
def test_allreduce_probe_refuses_too_many_virtual_devices(tmp_path) -> None:
    child = run_child("allreduce", AllreduceConfig(n_devices=17, max_virtual_cpu_devices=16),
                      run_dir=tmp_path, name="allreduce", timeout_s=120)
    assert not child.ok and child.error_type == "UsageError"
    assert "at most 16 virtual CPU devices" in child.error
