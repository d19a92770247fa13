"""The GPU side of `gpudiag memory`: NVML's view of the probe's own process.

The memory probe's NvmlView (gpudiag/probes/memory.py) reads the scripted fake backend
while real TensorFlow runs the probe's allocation pattern (on the CPU, the only device
here; on a GPU machine the same function runs on /GPU:0). The scenario: a 40 GiB GPU on
which this very process (its pid) holds 38 GiB once TensorFlow has initialised, as
TensorFlow's default allocator does. The findings must report NVML's numbers, taken from
the process's own entry, or from the device's used memory minus the baseline where the
pid is not listed (a container with its own pid namespace).
"""

from __future__ import annotations

import os

import pytest
from fake_clock import FakeClock
from fake_nvml import NO_NVML_REASON, FakeBackend, FakeDevice, open_scenario

from gpudiag.probes import memory as memory_probe
from gpudiag.records.results import MemoryNvml, MemoryResult
from gpudiag.verdicts import memory as verdicts

pytestmark = pytest.mark.slow

MIB, GIB = 2**20, 2**30
BEFORE_TF = 300 * MIB  # what the device holds before the probe's TensorFlow starts
HELD = 38 * GIB  # what the process holds once TensorFlow has initialised the GPU
STEPS, STEP_MB = 3, 8


def scenario(pids: tuple[int, ...], clock: FakeClock) -> FakeBackend:
    """Two GPUs; TensorFlow's GPU:0 is NVML's GPU 1 (CUDA_VISIBLE_DEVICES=1), where the
    process holds HELD from t = 1 s on (the fake clock moves when TensorFlow starts)."""
    other = FakeDevice(memory_total_bytes=16 * GIB, pids=())
    ours = FakeDevice(memory_total_bytes=40 * GIB, pids=pids,
                      memory_used_bytes=lambda t: HELD if t >= 1.0 else BEFORE_TF)
    return FakeBackend([other, ours], scenario="process_holds_the_card", clock=clock)


def probe_result(backend: FakeBackend, clock: FakeClock) -> MemoryResult:
    """What the memory probe's child reports for the default mode, NVML's side scripted."""
    import tensorflow as tf

    view = memory_probe.NvmlView(backend)  # before TensorFlow: the baseline
    clock.advance(1.0)  # TensorFlow initialises the GPU
    pattern = memory_probe.allocation_pattern(tf, "/CPU:0", STEPS, STEP_MB, view)
    assert not backend.closed  # the view uses the backend; the probe's run() closes it
    return MemoryResult(mode="default", gpu_available=True, physical_gpus=["GPU:0"], env={},
                        memory_growth=False, nvml=view.describe(), pattern=pattern)


@pytest.fixture(autouse=True)
def _second_gpu_is_gpu0(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID")


def test_findings_use_nvml_s_numbers_for_the_process() -> None:
    clock = FakeClock()
    result = probe_result(scenario((os.getpid(),), clock), clock)
    assert result.nvml == MemoryNvml(available=True, reason=None, index=1, mapping_note=None,
                                     total_bytes=40 * GIB,
                                     baseline_device_used_bytes=BEFORE_TF)
    assert result.pattern is not None
    readings = result.pattern.readings
    assert len(readings) == STEPS + 2  # initialised, one per step, released
    assert all(r.nvml_process_used_bytes == HELD for r in readings)
    assert all(r.nvml_device_used_bytes == HELD for r in readings)
    tf_peak = max(r.tf_peak_bytes for r in readings)
    assert STEPS * STEP_MB * MIB <= tf_peak < HELD  # TensorFlow's own view, really measured

    default = verdicts.memory_default(result)
    assert default.status == "ok"
    assert default.evidence["nvml_source"] == "process"
    assert default.evidence["nvml_held_max_bytes"] == HELD
    assert default.evidence["nvml_held_by_step"] == [HELD] * (STEPS + 1)
    assert default.evidence["nvml_total_bytes"] == 40 * GIB
    assert "the process held 38912 MiB (95 % of the card)" in default.message

    growth = verdicts.memory_growth(result, default=result)
    assert growth.status == "fail"  # NVML says the whole card, TF's peak says a few MiB
    assert "held 38912 MiB (NVML)" in growth.message
    assert growth.evidence["default_nvml_held_max_bytes"] == HELD


def test_without_the_process_entry_the_device_minus_baseline_is_used() -> None:
    clock = FakeClock()
    result = probe_result(scenario((4242,), clock), clock)  # our pid is not listed
    assert result.pattern is not None
    assert all(r.nvml_process_used_bytes is None for r in result.pattern.readings)
    f = verdicts.memory_default(result)
    assert f.status == "ok"
    assert f.evidence["nvml_source"] == "device minus baseline"
    assert f.evidence["nvml_held_max_bytes"] == HELD - BEFORE_TF


def test_nvml_view_says_why_it_has_no_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    assert memory_probe.NvmlView(open_scenario("no_nvml")).describe().reason == NO_NVML_REASON
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "-1")
    hidden = memory_probe.NvmlView(scenario((os.getpid(),), FakeClock()))
    assert hidden.describe().reason == (
        "cannot tell which NVML device is GPU:0: CUDA_VISIBLE_DEVICES has no entry 0")
    assert hidden.read() == {}


def test_a_gpu_lost_during_the_probe_ends_the_readings_with_the_reason() -> None:
    clock = FakeClock()
    backend = scenario((os.getpid(),), clock)
    backend.devices[1].lost_after_s = 0.5
    view = memory_probe.NvmlView(backend)
    assert view.read()["nvml_process_used_bytes"] == BEFORE_TF
    clock.advance(1.0)
    assert view.read() == {}
    assert view.describe().reason == "NVML failed during the probe: GPU is lost"
    assert view.describe().available is False
    assert not backend.closed
