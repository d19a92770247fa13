"""Memory verdicts from plain data: what a GPU machine's children would report.

The results are written in the children's result.json format (probes/results.py's
MemoryResult.to_dict) and read back with from_dict, as the parent does; the numbers are the shapes
seen on GPUs (default mode reserving most of a 40 GiB card, growth tracking the peak), so
the rules are tested without a GPU. Whether TensorFlow really behaves so is for
docs/gpu-validation.md.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpudiag.records.results import ConfigAttempt, MemoryNvml, MemoryResult
from gpudiag.verdicts import memory as verdicts

MIB, GIB = 2**20, 2**30
CONTEXT = 420 * MIB  # CUDA context + cuBLAS handles


def result(
    nvml_held: list[int] | None,
    *,
    steps: int = 8,
    step_mb: int = 64,
    process_entry: bool = True,
    baseline: int = 300 * MIB,
    **extra: object,
) -> MemoryResult:
    """A child's result: TF peak grows step_mb per step; NVML holds ``nvml_held`` per step."""
    readings = []
    for k in range(steps + 1):
        r: dict = {
            "step": k,
            "phase": "initialised" if k == 0 else "grow",
            "held_mb": k * step_mb,
            "t_s": 0.1 * k,
            "tf_current_bytes": k * step_mb * MIB,
            "tf_peak_bytes": k * step_mb * MIB,
        }
        if nvml_held is not None:
            if process_entry:
                r["nvml_process_used_bytes"] = nvml_held[k]
                r["nvml_device_used_bytes"] = baseline + nvml_held[k]
            else:
                r["nvml_process_used_bytes"] = None
                r["nvml_device_used_bytes"] = baseline + nvml_held[k]
        readings.append(r)
    readings.append({**readings[-1], "step": steps + 1, "phase": "released", "tf_current_bytes": 0})
    return MemoryResult.from_dict({
        "mode": "default",
        "gpu_available": True,
        "physical_gpus": ["/physical_device:GPU:0"],
        "env": {"TF_FORCE_GPU_ALLOW_GROWTH": None},
        "memory_growth": extra.pop("memory_growth", False),
        "nvml": {
            "available": nvml_held is not None,
            "reason": None if nvml_held is not None else "NVML did not initialise: x",
            "total_bytes": 40 * GIB,
            "baseline_device_used_bytes": baseline,
        },
        "pattern": {
            "device": "/GPU:0",
            "steps": steps,
            "step_mb": step_mb,
            "readings": readings,
            "allocation_error": None,
        },
        **extra,
    })


GROWING = [CONTEXT + k * 64 * MIB for k in range(9)]
WHOLE_CARD = [38 * GIB] * 9


def test_default_reports_the_share_of_the_card() -> None:
    f = verdicts.memory_default(result(WHOLE_CARD))
    assert f.status == "ok" and f.id == "memory.default"
    assert "held 38912 MiB (95 % of the card)" in f.message and "peak was 512 MiB" in f.message


def test_growth_tracking_the_peak_is_ok() -> None:
    f = verdicts.memory_growth(result(GROWING, memory_growth=True), default=result(WHOLE_CARD))
    assert f.status == "ok"
    assert "set_memory_growth(gpu, True) works" in f.message
    assert "held 932 MiB (NVML) at TensorFlow's peak of 512 MiB" in f.message
    assert "(default mode: 38912 MiB)" in f.message


def test_growth_that_still_takes_the_card_is_a_fail() -> None:
    f = verdicts.memory_growth(result(WHOLE_CARD, memory_growth=True), check_id="memory.growth-env")
    assert f.status == "fail" and f.id == "memory.growth-env"
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true did not take effect" in f.message
    assert "not set to false" in f.advice


def test_growth_flat_but_small_is_not_tracking() -> None:
    # NVML never moved although TF's peak grew by 512 MiB: the allocator pre-reserved.
    flat = [CONTEXT + 600 * MIB] * 9
    assert verdicts.memory_growth(result(flat)).status == "fail"


def test_growth_without_nvml_is_a_skip_with_tf_numbers() -> None:
    f = verdicts.memory_growth(result(None, memory_growth=True))
    assert f.status == "skip" and "peak rose to 512 MiB" in f.message
    assert "NVML did not initialise" in f.message


def test_cpu_without_a_pattern_is_a_fail() -> None:
    cpu = replace(result(None), gpu_available=False, pattern=None)
    assert verdicts.memory_cpu(cpu).status == "fail"


def test_device_minus_baseline_when_nvml_lists_no_pid() -> None:
    s = verdicts.memory_series(result(GROWING, process_entry=False))
    assert s.nvml_source == "device minus baseline"
    assert s.nvml_held_by_step == GROWING
    assert s.released_current_bytes == 0


def limit_result(
    *,
    raised: bool = True,
    error_type: str = "ResourceExhaustedError",
    alive: bool = True,
    held: list[int] | None = None,
) -> MemoryResult:
    return result(
        held or [CONTEXT + 1024 * MIB] * 9,
        memory_limit_mb=1024,
        past_limit={
            "size_mb": 1088,
            "raised": raised,
            "error_type": error_type if raised else None,
            "error": "OOM when allocating tensor with shape[285212672]" if raised else None,
        },
        alive_after=alive,
    )


def test_limit_holds() -> None:
    f = verdicts.memory_limit(limit_result(), 1024)
    assert f.status == "ok"
    assert "allocating 1088 MiB raised ResourceExhaustedError inside the child" in f.message


@pytest.mark.parametrize(
    ("kwargs", "status", "needle"),
    [
        ({"raised": False}, "fail", "did not hold"),
        ({"error_type": "InternalError"}, "warn", "not ResourceExhaustedError"),
        ({"alive": False}, "fail", "could no longer run an op"),
        ({"held": [12 * GIB] * 9}, "fail", "more than the 1024 MiB limit"),
    ],
)
def test_limit_failures(kwargs: dict, status: str, needle: str) -> None:
    f = verdicts.memory_limit(limit_result(**kwargs), 1024)
    assert f.status == status and needle in f.message


def test_modify_after_init_quotes_tensorflow() -> None:
    attempt = ConfigAttempt("tf.config.experimental.set_memory_growth(gpu, True)", raised=True,
                            error_type="RuntimeError",
                            error="Physical devices cannot be modified after being initialized")
    gpu = MemoryResult("modify_after_init", True, ["/physical_device:GPU:0"], {},
                       MemoryNvml(available=True), attempts=[attempt])
    f = verdicts.memory_modify_after_init(gpu)
    assert f.status == "ok"
    assert '"Physical devices cannot be modified after being initialized"' in f.message
    assert "TF_FORCE_GPU_ALLOW_GROWTH=true" in f.message
    silent = replace(gpu, attempts=[replace(attempt, raised=False)])
    assert verdicts.memory_modify_after_init(silent).status == "fail"
    assert verdicts.memory_modify_after_init(replace(gpu, attempts=[])).status == "fail"


def test_growth_allows_the_allocators_doubling_regions() -> None:
    # 8 x 1 GiB with growth: regions of 1, 2, 4, 8 GiB = 15 GiB for a peak of 8 GiB.
    regions = [CONTEXT + r * GIB for r in (0, 1, 3, 3, 7, 7, 7, 7, 15)]
    f = verdicts.memory_growth(result(regions, step_mb=1024))
    assert f.status == "ok"
    # but not the whole card for a peak of 512 MiB
    assert verdicts.memory_growth(result([CONTEXT + 30 * GIB] * 9)).status == "fail"
