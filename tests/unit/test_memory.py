"""`gpudiag memory` for real: TensorFlow in child processes, report and TensorBoard files.

No GPU here: the GPU modes must be skip findings with the reason, the CPU's memory info
must be reported, and the "modify after initialise" error must come from TensorFlow itself.
The --fraction helpers (limit from a fraction of GPU:0's memory) run on the fake NVML backend.
"""

from __future__ import annotations

import fake_nvml
import pytest

from gpudiag.commands import memory as memory_cmd

MIB, GIB = 2**20, 2**30


def test_fraction_converts_with_the_gpus_total() -> None:
    assert memory_cmd.limit_from_fraction(0.5, 40 * GIB) == 20480
    assert memory_cmd.limit_from_fraction(1e-9, 40 * GIB) == 1


def test_fraction_uses_the_nvml_device_behind_gpu0(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = fake_nvml.FakeBackend(
        [
            fake_nvml.FakeDevice(memory_total_bytes=16 * GIB),
            fake_nvml.FakeDevice(memory_total_bytes=80 * GIB),
        ]
    )
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert memory_cmd.gpu0_total_bytes(backend) == (80 * GIB, None)
    assert not backend.closed  # the caller (the CLI) opened it and closes it
    total, why = memory_cmd.gpu0_total_bytes(fake_nvml.open_scenario("no_nvml"))
    assert total is None and why == fake_nvml.NO_NVML_REASON
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    total, why = memory_cmd.gpu0_total_bytes(backend)
    assert total is None and why == ("cannot tell which NVML device is GPU:0: "
                                     "CUDA_VISIBLE_DEVICES has no entry 0")

