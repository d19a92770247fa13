"""gpudiag.nvml: the query helper, the sampler against the scripted fake backend, the
pure summaries, TensorBoard scalars read back, and open_backend on this machine.

The sampler runs its real threads on a FakeClock shared with the fake backend: the test
moves time, every poll happens at an exact instant, and nothing sleeps, so the counts and
times below are exact, on an idle machine as on a loaded one. Durations end between two
polls (1.05 s, not 1.0 s) so no poll sits on the edge of a window.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Callable

import fake_nvml
import pynvml
import pytest
from fake_clock import FakeClock
from fake_nvml import FakeBackend, FakeDevice
from helpers import read_scalars

from gpudiag import nvml
from gpudiag.nvml import (
    NOT_AVAILABLE,
    DeviceError,
    DeviceInfo,
    DeviceSamples,
    DeviceState,
    NvmlUnavailable,
    Sample,
    Sampler,
    TimedUtil,
    summarise_device,
)

DRIVER_PERIOD_S = fake_nvml.DRIVER_SAMPLE_PERIOD_S


def clocked(scenario: Callable[..., FakeBackend], *args: object, **kwargs: object) -> FakeBackend:
    """A scripted scenario on a fresh FakeClock that the Sampler's two threads wait on."""
    return scenario(*args, clock=FakeClock(parties=2), **kwargs)


def run_sampler(backend: FakeBackend, seconds: float, **kwargs: object) -> nvml.SamplingResult:
    """Sample ``backend`` for ``seconds`` of its FakeClock (no real time passes)."""
    clock = backend.clock
    assert isinstance(clock, FakeClock)
    with Sampler(backend, clock=clock, **kwargs) as sampler:  # type: ignore[arg-type]
        clock.advance(seconds)
    assert sampler.result is not None
    return sampler.result


# --------------------------------------------------------------------------- query helper


def _raises(code: int):
    def fn(*_args: object) -> None:
        raise pynvml.NVMLError(code)

    return fn


@pytest.mark.parametrize(
    "code",
    [
        pynvml.NVML_ERROR_NOT_SUPPORTED,
        pynvml.NVML_ERROR_FUNCTION_NOT_FOUND,
        pynvml.NVML_ERROR_NO_PERMISSION,
    ],
)
def test_query_turns_unsupported_into_not_available(code: int) -> None:
    assert nvml.query(pynvml, _raises(code), "handle", index=0) is NOT_AVAILABLE


def test_query_turns_gpu_lost_into_device_error_for_that_device() -> None:
    with pytest.raises(DeviceError) as info:
        nvml.query(pynvml, _raises(pynvml.NVML_ERROR_GPU_IS_LOST), "handle", index=3)
    assert info.value.index == 3
    assert info.value.reason == "GPU is lost"
    assert isinstance(info.value.__cause__, pynvml.NVMLError_GpuIsLost)


def test_query_not_found_is_empty_only_where_asked() -> None:
    not_found = _raises(pynvml.NVML_ERROR_NOT_FOUND)
    assert nvml.query(pynvml, not_found, index=0, empty_on_not_found=True) == []
    with pytest.raises(DeviceError, match="Not Found"):
        nvml.query(pynvml, not_found, index=0)


def test_query_passes_values_and_arguments_through() -> None:
    assert nvml.query(pynvml, lambda a, b: a + b, 2, 3, index=None) == 5


def test_open_backend_on_this_machine_says_why_or_works() -> None:
    backend = nvml.open_backend()
    if isinstance(backend, NvmlUnavailable):
        # No NVIDIA driver here: a reason a person can act on, never an exception.
        assert backend.reason.startswith("NVML did not initialise") or "bindings" in backend.reason
        assert "libnvidia-ml" in backend.reason or "driver" in backend.reason
    else:  # a machine with a GPU
        try:
            assert backend.device_count() >= 1
            info = backend.device_info(0)
            assert info.index == 0
        finally:
            backend.close()


# --------------------------------------------------------------------------- sampler


def test_interval_below_nvml_window_is_refused() -> None:
    backend = fake_nvml.busy()
    for bad in (0.0, -1.0, 0.05, float("nan")):
        with pytest.raises(ValueError, match=r"at least 0\.1"):
            Sampler(backend, interval_s=bad)


def test_sampler_polls_at_its_interval_and_stops_cleanly() -> None:
    backend = clocked(fake_nvml.busy, n=2)
    clock = backend.clock
    assert isinstance(clock, FakeClock)
    sampler = Sampler(backend, interval_s=0.1, clock=clock).start()
    clock.advance(1.05)
    result = sampler.stop()
    assert not any(t.name.startswith("gpudiag-nvml") for t in threading.enumerate())
    calls_after_stop = dict(backend.calls)
    clock.advance(1.0)
    assert dict(backend.calls) == calls_after_stop  # nothing polls after stop()

    assert result.duration_s == pytest.approx(1.05)
    for index in (0, 1):
        times = [s.t_s for s in result.samples if s.index == index]
        # one poll at start, one every 0.1 s up to 1.0 s, one on stop at 1.05 s
        assert times == pytest.approx([k / 10 for k in range(11)] + [1.05])
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert gaps == pytest.approx([0.1] * 10 + [0.05])
    assert sampler.stop() is result  # idempotent


def test_slow_per_process_query_is_kept_out_of_the_fast_loop() -> None:
    backend = clocked(fake_nvml.busy, n=2)
    result = run_sampler(backend, 2.15, interval_s=0.1)
    # fast: at 0, 0.1, ... 2.1 s and on stop, for each of two devices
    assert backend.calls["device_state"] == 2 * 23
    assert result.cost.polls == 23
    # slow: first one interval in (0.1 s), then every 1 s (1.1 s, 2.1 s)
    assert result.cost.slow_polls == 3
    assert backend.calls["processes"] == 2 * 3
    assert backend.calls["pcie_throughput"] == 2 * 3
    assert backend.calls["device_info"] == 2  # static info read once per device
    assert [p.first_seen_s for p in result.summary(0).processes] == pytest.approx([0.1])
    assert [p.last_seen_s for p in result.summary(0).processes] == pytest.approx([2.1])


def test_short_run_still_gets_fine_grained_driver_samples() -> None:
    backend = clocked(fake_nvml.busy, n=1)
    result = run_sampler(backend, 1.1, interval_s=0.5)
    summary = result.summary(0)
    assert summary.poll_count == 4  # 0, 0.5, 1.0 s and on stop
    assert summary.util_source == "driver"
    # the driver's 1/6 s samples, drained between polls: 1/6 s ... 1 s
    assert summary.util_sample_count == 6
    ts = [u.t_s for u in result.util_samples]
    assert ts == pytest.approx([k * DRIVER_PERIOD_S for k in range(1, 7)], abs=1e-5)
    # Only samples taken after start (none from t = 0 or before), each read once.
    assert all(t > 0 for t in ts)
    assert len(ts) == len(set(ts))


def test_busy_summary() -> None:
    result = run_sampler(clocked(fake_nvml.busy, n=2), 0.85, interval_s=0.1)
    for s in result.summaries:
        assert s.error is None
        assert s.util_mean_percent == pytest.approx(90.0)
        assert s.util_p50_percent == pytest.approx(90.0)
        assert s.util_p95_percent == pytest.approx(90.0)
        assert s.util_max_percent == pytest.approx(90.0)
        assert s.active_s is not NOT_AVAILABLE
        # five driver samples (1/6 s ... 5/6 s), each covering the 1/6 s before it
        assert s.active_s == pytest.approx(5 * DRIVER_PERIOD_S, abs=1e-5)
        assert result.duration_s - s.active_s < DRIVER_PERIOD_S
        assert s.peak_memory_used_bytes is not NOT_AVAILABLE
        # memory grows 100 MiB/s in the scenario: the peak is the last poll's, at 0.85 s
        assert s.peak_memory_used_bytes == fake_nvml.GIB + int(0.85 * 100 * 2**20)
        assert s.memory_total_bytes == 40 * fake_nvml.GIB
        assert [p.pid for p in s.processes] == [4242]
        assert s.power_mean_w == pytest.approx(250.0)
        assert s.pci_bus_id == f"00000000:{0x3B + s.index:02X}:00.0"
        assert s.unavailable_fields == ()
    assert result.sampler_error is None


def test_one_idle_gpu_summary() -> None:
    result = run_sampler(clocked(fake_nvml.one_idle, n=2, idle_index=1), 0.65, interval_s=0.1)
    busy, idle = result.summary(0), result.summary(1)
    assert busy.util_mean_percent == pytest.approx(90.0)
    assert idle.util_max_percent == 0.0
    assert idle.active_s == 0.0
    assert idle.processes == ()
    assert busy.active_s is not NOT_AVAILABLE
    assert busy.active_s == pytest.approx(3 * DRIVER_PERIOD_S, abs=1e-5)  # 1/6 ... 1/2 s


def test_gpu_lost_mid_run_becomes_error_record_others_keep_reporting() -> None:
    backend = clocked(fake_nvml.lost_mid_run, n=2, lost_index=1, lost_after_s=0.35)
    result = run_sampler(backend, 1.05, interval_s=0.1)
    ok, lost = result.summary(0), result.summary(1)
    assert ok.error is None
    # polled fine at 0, 0.1, 0.2, 0.3 s; the poll at 0.4 s found it lost
    assert lost.error == "GPU is lost (at 0.4 s)"
    assert lost.poll_count == 4
    assert lost.observed_s == pytest.approx(0.3)
    assert ok.observed_s == pytest.approx(1.05)
    assert ok.poll_count == 12
    # what was seen before the loss still counts
    assert lost.util_mean_percent == pytest.approx(90.0)
    assert result.sampler_error is None


def test_gpu_lost_before_first_poll() -> None:
    result = run_sampler(clocked(fake_nvml.lost_at_start, n=2, lost_index=1), 0.45,
                         interval_s=0.1)
    lost = result.summary(1)
    assert lost.error == "GPU is lost (at start)"
    assert lost.poll_count == 0
    assert lost.util_source == "none"
    assert lost.util_mean_percent is NOT_AVAILABLE
    assert result.summary(0).poll_count == 6  # 0 ... 0.4 s and on stop
    json.dumps(result.to_dict(with_samples=True))


def test_unsupported_fields_are_not_available_not_errors() -> None:
    result = run_sampler(clocked(fake_nvml.unsupported, n=1), 0.55, interval_s=0.1)
    s = result.summary(0)
    assert s.error is None
    assert s.util_source == "polled"  # no driver samples: falls back to the polls
    assert s.util_sample_count == s.poll_count == 7
    assert s.util_mean_percent == pytest.approx(90.0)
    assert s.power_mean_w is NOT_AVAILABLE
    assert s.temperature_max_c is NOT_AVAILABLE
    assert s.power_limit_w is NOT_AVAILABLE
    assert s.pcie_tx_max_kib_per_s is NOT_AVAILABLE
    assert s.processes == ()
    for name in (
        "power_draw_w",
        "temperature_c",
        "sm_clock_mhz",
        "utilization_samples",
        "pcie_throughput",
        "power_limit_w",
    ):
        assert name in s.unavailable_fields
    assert "memory_used_bytes" not in s.unavailable_fields
    as_json = json.loads(json.dumps(result.to_dict()))
    assert as_json["summaries"][0]["power_mean_w"] is None
    assert as_json["summaries"][0]["util_mean_percent"] == pytest.approx(90.0)


def test_no_utilization_at_all() -> None:
    s = run_sampler(clocked(fake_nvml.no_utilization), 0.35, interval_s=0.1).summary(0)
    assert s.util_source == "none"
    assert s.util_mean_percent is NOT_AVAILABLE and s.active_s is NOT_AVAILABLE
    assert s.peak_memory_used_bytes is not NOT_AVAILABLE


def test_device_indices_restrict_and_are_checked() -> None:
    backend = clocked(fake_nvml.busy, n=3)
    result = run_sampler(backend, 0.35, interval_s=0.1, device_indices=[2])
    assert result.device_indices == (2,)
    assert {s.index for s in result.samples} == {2}
    assert backend.calls["device_info"] == 1
    with pytest.raises(ValueError, match="no GPU 7: NVML sees 3"):
        Sampler(fake_nvml.busy(n=3), device_indices=[7]).start()


def test_unexpected_backend_failure_is_surfaced_not_swallowed() -> None:
    polled = threading.Event()

    class Broken(FakeBackend):
        def device_state(self, index: int) -> DeviceState:
            polled.set()
            raise RuntimeError("bug in a backend")

    backend = Broken([FakeDevice()], clock=FakeClock())
    sampler = Sampler(backend, interval_s=0.1, clock=backend.clock).start()
    assert polled.wait(timeout=30)  # the fast thread's first poll has hit the bug
    result = sampler.stop()
    assert result.sampler_error is not None
    assert result.sampler_error.startswith("gpudiag-nvml-fast: RuntimeError('bug in a backend'")
    assert result.summary(0).poll_count == 0  # and the summary says so, not a fake 0 %
    assert result.summary(0).util_mean_percent is NOT_AVAILABLE


def test_sampler_measures_its_own_cost() -> None:
    result = run_sampler(clocked(fake_nvml.busy, n=2), 0.65, interval_s=0.1)
    cost = result.cost
    assert cost.polls == 8  # 0 ... 0.6 s and on stop
    assert cost.slow_polls == 1
    assert cost.duration_s == pytest.approx(0.65)
    # CPU and poll time are measured on the real clocks, whatever clock schedules polls
    assert cost.cpu_s > 0
    assert 0 < cost.poll_wall_mean_s <= cost.poll_wall_max_s < 0.1
    assert cost.cpu_fraction == pytest.approx(cost.cpu_s / 0.65)
    assert cost.cpu_fraction < 0.2
    assert result.to_dict()["cost"]["cpu_fraction"] == pytest.approx(cost.cpu_fraction)


def test_sampler_on_the_system_clock_samples_in_real_time() -> None:
    # The default clock, as commands use it: the threads really wait between polls. Only
    # bounds no load can break; the exact schedule is tested on the FakeClock above.
    third_poll = threading.Event()

    class Counting(FakeBackend):
        def device_state(self, index: int) -> DeviceState:
            state = super().device_state(index)
            if self.calls["device_state"] == 3:
                third_poll.set()
            return state

    sampler = Sampler(Counting([FakeDevice()]), interval_s=0.1).start()
    assert third_poll.wait(timeout=60)
    result = sampler.stop()
    assert result.summary(0).poll_count >= 4  # three in the loop, one on stop
    assert result.duration_s >= 0.2  # the third poll is due 0.2 s after the first
    assert result.sampler_error is None


# --------------------------------------------------------------------------- pure summaries


def _info(index: int = 0) -> DeviceInfo:
    return DeviceInfo(index, "GPU", "GPU-x", "00000000:3B:00.0", 16 * 2**30, 250.0)


def _state(util: float, used: int = 2**30) -> DeviceState:
    na = NOT_AVAILABLE
    return DeviceState(util, na, used, 16 * 2**30, na, na, na, na)


def test_summarise_scripted_polls() -> None:
    utils = [0, 0, 50, 100, 100, 100, 100, 100, 20, 0]
    samples = [
        Sample(0.5 * k, 1000.0 + 0.5 * k, 0, _state(u, 2**30 * (k + 1)))
        for k, u in enumerate(utils)
    ]
    s = summarise_device(
        DeviceSamples(_info(), samples), observed_s=4.5, interval_s=0.5,
        active_threshold_percent=10.0)
    assert s.util_source == "polled"
    assert s.util_mean_percent == pytest.approx(57.0)
    assert s.util_p50_percent == pytest.approx(75.0)
    assert s.util_max_percent == 100.0
    assert s.util_p95_percent == pytest.approx(100.0)
    # each reading covers the 0.5 s before it; the first (t=0) covers nothing
    assert s.active_s == pytest.approx(7 * 0.5)
    assert s.peak_memory_used_bytes == 10 * 2**30
    assert "power_draw_w" in s.unavailable_fields


def test_summarise_prefers_driver_samples() -> None:
    samples = [Sample(t, t, 0, _state(0.0)) for t in (0.0, 0.5, 1.0)]
    fine = [TimedUtil(k / 6, k / 6, 0, 60.0 if k % 2 else 0.0) for k in range(1, 7)]
    s = summarise_device(DeviceSamples(_info(), samples, fine), observed_s=1.0)
    assert s.util_source == "driver" and s.util_sample_count == 6
    assert s.util_mean_percent == pytest.approx(30.0)
    assert s.active_s == pytest.approx(0.5)


def test_percentile() -> None:
    assert nvml.percentile([1.0], 95) == 1.0
    assert nvml.percentile([0.0, 10.0], 50) == 5.0
    assert nvml.percentile(list(map(float, range(101))), 95) == pytest.approx(95.0)
    with pytest.raises(ValueError):
        nvml.percentile([], 50)


# --------------------------------------------------------------------------- TensorBoard


def test_scalars_round_trip(tmp_path) -> None:
    result = run_sampler(clocked(fake_nvml.one_idle, n=2), 0.55, interval_s=0.1)
    tags = nvml.write_scalars(result, tmp_path / "nvml")
    assert "gpu0/util_percent" in tags and "gpu1/memory_used_mib" in tags
    stored = read_scalars(tmp_path / "nvml")
    assert set(tags) == set(stored)
    busy = [e.value for e in stored["gpu0/util_percent"]]
    idle = [e.value for e in stored["gpu1/util_percent"]]
    assert len(busy) == result.summary(0).poll_count == 7
    assert set(busy) == {90.0} and set(idle) == {0.0}
    assert stored["gpu1/memory_used_mib"][0].value == pytest.approx(300.0)
    fine = stored["gpu0/util_driver_percent"]
    assert len(fine) == result.summary(0).util_sample_count
    steps = [e.step for e in stored["gpu0/util_percent"]]
    assert steps == [0, 100, 200, 300, 400, 500, 550]  # milliseconds since start


def test_a_driver_call_that_hangs_does_not_hold_the_stop(monkeypatch) -> None:
    """A GPU falling off the bus can hang an NVML call: stop() (monitor's and run's end,
    a SIGTERM's included) waits for it a bounded time, then says so and returns."""
    monkeypatch.setattr(nvml.sampler, "STOP_WAIT_S", 0.5)
    hanging, release = threading.Event(), threading.Event()

    class Hangs(FakeBackend):
        def device_state(self, index: int) -> DeviceState:
            hanging.set()
            release.wait(timeout=60)
            return super().device_state(index)

    sampler = Sampler(Hangs([FakeDevice()]), interval_s=0.1).start()
    try:
        assert hanging.wait(timeout=30)  # the fast thread is inside the driver call
        result = sampler.stop()
    finally:
        release.set()
    assert result.sampler_error is not None
    assert result.sampler_error.startswith("gpudiag-nvml-fast: an NVML call had not returned "
                                           "0.5 s after the stop"), result.sampler_error
