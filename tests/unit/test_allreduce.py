"""The collective bandwidth probe: nccl-tests' arithmetic, and a real run in a child."""

from __future__ import annotations

import pytest

from gpudiag.probes.allreduce import bus_bandwidth
from gpudiag.records.training import (
    DEFAULT_SIZES_BYTES,
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
