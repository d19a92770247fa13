"""The collective bandwidth probe: nccl-tests' arithmetic, and a real run in a child."""

from __future__ import annotations

import pytest

from gpudiag.procs.runner import run_child
from gpudiag.records.training import (
    AllreduceConfig,
    AllreduceResult,
)

MIB = 1 << 20


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
