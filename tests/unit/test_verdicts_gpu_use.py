"""gpu_use verdicts (every_gpu_used, nvml_sampling) from scripted samples (plain data)."""

from __future__ import annotations

import pytest

from gpudiag.nvml import (
    NOT_AVAILABLE,
    DeviceInfo,
    DeviceSamples,
    DeviceState,
    DeviceSummary,
    ProcessSeen,
    Sample,
    SamplerCost,
    SamplingResult,
    summarise_device,
)
from gpudiag.verdicts.gpu_use import every_gpu_used, gpu_numbers, nvml_sampling

GIB = 2**30
NA = NOT_AVAILABLE


def scripted(
    index: int,
    utils: list[float],
    *,
    dt: float = 0.5,
    error: str | None = None,
    util_supported: bool = True,
    used: int = 2 * GIB,
    pids: tuple[int, ...] = (),
) -> DeviceSummary:
    """A device summary from a scripted utilization series polled every ``dt`` seconds."""
    info = DeviceInfo(
        index,
        "NVIDIA A100-SXM4-40GB",
        f"GPU-{index}",
        f"00000000:{index + 7:02X}:00.0",
        40 * GIB,
        400.0,
    )
    samples = [
        Sample(
            k * dt,
            1e9 + k * dt,
            index,
            DeviceState(u if util_supported else NA, NA, used, 40 * GIB, NA, NA, NA, NA),
        )
        for k, u in enumerate(utils)
    ]
    observed = samples[-1].t_s if samples else 0.0
    return summarise_device(
        DeviceSamples(info, samples, error=error,
                      processes=[ProcessSeen(p, used, 0.5, observed) for p in pids]),
        observed_s=observed,
        interval_s=dt,
        active_threshold_percent=10.0,
    )


BUSY = [0, 85, 90, 95, 92, 88, 91, 93, 90, 87, 0]
IDLE = [0, 0, 1, 0, 0, 2, 0, 0, 0, 0, 0]


def test_all_busy_is_ok_with_numbers() -> None:
    f = every_gpu_used([scripted(0, BUSY), scripted(1, BUSY)], 10.0)
    assert f.status == "ok"
    assert "every GPU worked" in f.message and "GPU 0: mean" in f.message
    assert f.evidence["worked_indices"] == [0, 1] and f.evidence["idle_indices"] == []
    assert f.evidence["gpus"][1]["util_p95_percent"] is not None


def test_one_idle_gpu_while_others_work_is_a_fail_naming_it() -> None:
    f = every_gpu_used([scripted(0, BUSY), scripted(1, IDLE, used=30 * GIB, pids=(4242,))], 10.0)
    assert f.status == "fail"
    assert f.message.startswith("only GPU(s) 0 of 2 worked")
    assert "GPU 1 (NVIDIA A100-SXM4-40GB, 00000000:08:00.0) stayed idle" in f.message
    assert "max 2 %" in f.message
    # memory reserved there but no kernel: the classic "TF grabbed every GPU" picture
    assert "30.0 GiB, pid 4242" in f.message and "no kernel ran" in f.message
    assert f.evidence["idle_indices"] == [1]
    assert f.evidence["gpus"][1]["util_max_percent"] == 2.0
    assert "MirroredStrategy" in f.advice


def test_brief_spike_on_an_otherwise_idle_gpu_is_still_idle() -> None:
    spiky = [0] * 30 + [60] + [0] * 9  # one 0.5 s blip in 20 s: p95 under threshold
    f = every_gpu_used([scripted(0, BUSY * 4), scripted(1, spiky)], 10.0)
    assert f.status == "fail" and f.evidence["idle_indices"] == [1]


def test_threshold_decides() -> None:
    light = [0, 12, 14, 15, 13, 12, 14, 15, 13, 12, 0]
    summaries = [scripted(0, BUSY), scripted(1, light)]
    assert every_gpu_used(summaries, 10.0).status == "ok"
    assert every_gpu_used(summaries, 20.0).status == "fail"


def test_no_gpu_used_at_all_is_a_fail() -> None:
    f = every_gpu_used([scripted(0, IDLE), scripted(1, IDLE)], 10.0)
    assert f.status == "fail" and f.message.startswith("no GPU was used: all 2 stayed under 10 %")


def test_too_short_to_judge_is_a_warn() -> None:
    f = every_gpu_used([scripted(0, [0, 0]), scripted(1, [0, 0])], 10.0)
    assert f.status == "warn" and "too short" in f.message


def test_lost_gpu_is_a_fail_even_if_others_worked() -> None:
    f = every_gpu_used(
        [scripted(0, BUSY), scripted(1, BUSY[:4], error="GPU is lost (at 1.6 s)")], 10.0
    )
    assert f.status == "fail"
    assert "GPU 1 (NVIDIA A100-SXM4-40GB, 00000000:08:00.0) failed: GPU is lost (at 1.6 s)" in (
        f.message
    )
    assert f.evidence["lost_indices"] == [1]
    assert "Xid" in f.advice


def test_expected_indices_restrict_the_judgement() -> None:
    summaries = [scripted(0, BUSY), scripted(1, IDLE)]
    f = every_gpu_used(summaries, 10.0, expected_indices=[0])
    assert f.status == "ok"
    assert len(f.evidence["gpus"]) == 2  # the other GPU is still in the evidence


def test_unavailable_nvml_is_a_skip_with_the_reason() -> None:
    f = every_gpu_used([], 10.0, nvml_unavailable_reason="NVML did not initialise: no driver")
    assert f.status == "skip" and "NVML did not initialise: no driver" in f.message


def test_gpu_without_utilization_readings_is_not_called_idle() -> None:
    blind = scripted(1, BUSY, util_supported=False)
    assert every_gpu_used([blind], 10.0).status == "skip"
    f = every_gpu_used([scripted(0, BUSY), blind], 10.0)
    assert f.status == "warn" and "no utilization reading for GPU 1" in f.message


def test_check_id_is_the_callers() -> None:
    f = every_gpu_used([scripted(0, BUSY)], 10.0, check_id="scaling.towers-2dev.nvml")
    assert f.id == "scaling.towers-2dev.nvml"


def sampling(summaries: list[DeviceSummary], *, cpu_s: float = 0.02,
             sampler_error: str | None = None) -> SamplingResult:
    """A sampler run of 10 s, 20 polls, costing ``cpu_s`` CPU seconds."""
    return SamplingResult(
        backend="fake", interval_s=0.5, started_wall_s=1e9, duration_s=10.0,
        device_indices=tuple(s.index for s in summaries), samples=(), util_samples=(),
        summaries=tuple(summaries),
        cost=SamplerCost(polls=20, slow_polls=0, cpu_s=cpu_s, duration_s=10.0,
                         poll_wall_mean_s=0.001, poll_wall_max_s=0.002),
        sampler_error=sampler_error,
    )


def test_sampling_ok_names_its_cost_and_what_devices_could_not_report() -> None:
    f = nvml_sampling("fake", None, 0.5, sampling([scripted(0, BUSY)]))
    assert f.status == "ok" and f.id == "nvml.sampling"
    assert "sampled 1 GPU(s) every 0.5 s for 10.0 s (20 polls" in f.message
    assert "0.20% of one CPU core" in f.message
    assert "GPU 0:" in f.message and "not available" in f.message  # the fake's NA fields
    assert f.evidence["cost"]["cpu_fraction"] == 0.002


def test_sampling_that_costs_too_much_warns_and_a_dead_sampler_fails() -> None:
    costly = nvml_sampling("fake", None, 0.5, sampling([scripted(0, BUSY)], cpu_s=1.0))
    assert costly.status == "warn" and "more than 5 %" in costly.message
    assert "--interval" in costly.advice
    dead = nvml_sampling("fake", None, 0.5, sampling([scripted(0, BUSY)],
                                                     sampler_error="NVMLError: boom"))
    assert dead.status == "fail" and "stopped early: NVMLError: boom" in dead.message


def test_sampling_without_nvml_is_a_skip_under_the_callers_id() -> None:
    f = nvml_sampling(None, "no driver", 0.5, None, check_id="monitor.nvml")
    assert f.status == "skip" and f.id == "monitor.nvml" and "no driver" in f.message


def test_gpu_numbers_turn_not_available_into_none() -> None:
    n = gpu_numbers(scripted(0, BUSY, util_supported=False))
    assert n["util_mean_percent"] is None and n["util_source"] is not None
    assert n["peak_memory_used_bytes"] == 2 * GIB and n["name"] == "NVIDIA A100-SXM4-40GB"


def test_the_p95_interval_covers_the_95th_percentile_as_often_as_it_says() -> None:
    import random

    from gpudiag.nvml.summaries import quantile_ci

    rng = random.Random(7)
    held = 0
    for _ in range(1000):
        values = sorted(rng.random() for _ in range(200))
        low, high = quantile_ci(values, 95)  # type: ignore[misc]
        held += low <= 0.95 <= high
    assert 0.94 <= held / 1000 <= 0.99
    assert quantile_ci(sorted(range(50)), 95) is None  # too few for an interval: a point


def test_a_gpu_whose_p95_interval_crosses_the_threshold_is_near_whichever_side() -> None:
    # 6 driver samples a second for 50 s: busy (60 %) in about 5 % of them. Two runs of the
    # same program: the p95 lands under the line in one and over it in the other; both
    # are the one warn naming the GPU near the threshold, with the interval.
    found = []
    for busy_every in (22, 19):  # 4.5 % and 5.3 % of the samples busy
        utils = [60.0 if k % busy_every == 0 else 0.0 for k in range(300)]
        s = scripted(1, utils, dt=1 / 6)
        f = every_gpu_used([scripted(0, [90.0] * 300, dt=1 / 6), s], 10.0)
        found.append((s.util_p95_percent, f))
    assert found[0][0] < 10.0 <= found[1][0]  # the points fall on both sides
    for _, f in found:
        assert f.status == "warn", f.message
        assert f.evidence["near_indices"] == [1] and f.evidence["idle_indices"] == []
        assert "near the threshold: p95 utilization" in f.message
        assert "95 % CI of the p95 of 300 samples" in f.message
        assert f.title.startswith("GPU(s) 1 near the idle threshold")
    # far from the line, the interval leaves the verdict as it was
    quiet = every_gpu_used([scripted(0, [90.0] * 300, dt=1 / 6),
                            scripted(1, [0.0] * 300, dt=1 / 6)], 10.0)
    assert quiet.status == "fail" and quiet.evidence["idle_indices"] == [1]
    assert quiet.evidence["gpus"][1]["util_p95_ci_percent"] == [0.0, 0.0]


def test_a_gpu_near_the_threshold_is_read_as_such_not_as_used(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # the typed record readers decode (gpudiag.layout.evidence.GpuUse), and the tab's
    # NVML lane: "near idle", never "used"
    from gpudiag.layout.evidence import GpuUse
    from gpudiag.tbplugin import views

    utils = [60.0 if k % 19 == 0 else 0.0 for k in range(300)]
    f = every_gpu_used([scripted(0, [90.0] * 300, dt=1 / 6), scripted(1, utils, dt=1 / 6)],
                       10.0)
    typed = GpuUse.from_dict(f.evidence)
    assert typed.near_indices == (1,) and typed.worked_indices == (0,)
    monkeypatch.setattr(views, "_evidence", lambda run, *s: dict(f.evidence))
    monkeypatch.setattr(views, "_nvml_series", lambda run: {})
    lanes = views._nvml_lanes(None, {}, None)  # type: ignore[arg-type]
    assert [(ln["name"], ln["state"], ln["activity"]) for ln in lanes] == [
        ("GPU 0 (NVML)", "used", "busy"),
        ("GPU 1 (NVML)", "near the idle threshold", "near idle")]
