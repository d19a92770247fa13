"""verdicts.every_gpu_used and verdicts.nvml_sampling from scripted samples (plain data)."""

from __future__ import annotations

from gpudiag.nvml import (
    NOT_AVAILABLE,
    DeviceInfo,
    DeviceState,
    DeviceSummary,
    ProcessSeen,
    Sample,
    summarise_device,
)
from gpudiag.verdicts import every_gpu_used

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
        info,
        samples,
        [],
        error=error,
        observed_s=observed,
        interval_s=dt,
        processes=[ProcessSeen(p, used, 0.5, observed) for p in pids],
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
