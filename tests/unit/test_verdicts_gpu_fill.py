"""How full NVML's busy GPUs were (GPM), and run.bottleneck's use of it: plain data in."""

from __future__ import annotations

from typing import Any

from test_verdicts_bottleneck import breakdown

from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts.gpu_fill import bottleneck_note, gpus_of, sm_utilization


def gpu(index: int = 0, util: float | None = 100.0, sm: float | None = 3.0,
        occupancy: float | None = 1.5, reason: str | None = None,
        pids: tuple[int, ...] = ()) -> dict[str, Any]:
    """One GPU as gpu_use.gpu_numbers gives it (the fields this verdict reads)."""
    return {"index": index, "util_mean_percent": util, "sm_util_mean_percent": sm,
            "sm_occupancy_mean_percent": occupancy, "tensor_util_mean_percent": None,
            "dram_bw_util_mean_percent": None, "gpm_readings": 0 if sm is None else 10,
            "gpm_unavailable_reason": reason, "processes": list(pids)}


NO_GPM = gpu(sm=None, occupancy=None, reason="this GPU does not offer GPM metrics")


def test_busy_gpu_with_few_sms_at_work_is_a_few_small_kernels() -> None:
    f = sm_utilization([gpu(), gpu(1, 90.0, 80.0, 45.0)], nvml_unavailable_reason=None,
                       check_id="monitor.sm-utilization")
    assert f.status == "warn"
    assert f.message == ("GPU 0 is 'busy' with a few small kernels: NVML's utilization 100 % "
                         "(a kernel ran), GPM's SM utilization 3 %, occupancy 2 % (means over "
                         "10 readings); GPU 1: utilization 90 %, GPM's SM utilization 80 %, "
                         "occupancy 45 %")
    assert "larger batch" in f.advice and "jit_compile=True" in f.advice


def test_thresholds_are_where_the_docs_say() -> None:
    def status(util: float, sm: float) -> str:
        return sm_utilization([gpu(util=util, sm=sm)], nvml_unavailable_reason=None,
                              check_id="x").status
    assert status(50.0, 24.9) == "warn"
    assert status(49.9, 3.0) == "ok"  # not busy by NVML's count: every-gpu-used's business
    assert status(100.0, 25.0) == "ok"


def test_gpm_unavailable_is_said_not_silent() -> None:
    f = sm_utilization([NO_GPM], nvml_unavailable_reason=None, check_id="x")
    assert f.status == "skip"
    assert f.message.endswith("GPU 0: GPM metrics unavailable (this GPU does not offer GPM "
                              "metrics)")
    mixed = sm_utilization([gpu(util=95.0, sm=90.0), {**NO_GPM, "index": 1}],
                           nvml_unavailable_reason=None, check_id="x")
    assert mixed.status == "ok" and "GPU 1: GPM metrics unavailable" in mixed.message
    none = sm_utilization([], nvml_unavailable_reason="no driver", check_id="x")
    assert none.status == "skip" and "no driver" in none.message


def test_the_process_gpus_are_those_nvml_lists_it_on() -> None:
    gpus = [gpu(0, pids=(7,)), gpu(1, pids=(8,))]
    assert [g["index"] for g in gpus_of(7, gpus)] == [0]
    assert [g["index"] for g in gpus_of(7, [gpu(0), gpu(1)])] == [0, 1]  # no pids anywhere
    assert [g["index"] for g in gpus_of(9, gpus)] == [0, 1]  # pids of another namespace


def test_bottleneck_names_small_kernels_on_a_compute_bound_gpu_step() -> None:
    b = breakdown(("/device:GPU:0", 10, 9, 0, 0, 0.5, 0.5, 0), source="device-plane")
    plain = bn.bottleneck(b, None, bn.ProgramFacts(nvml_gpus=None))
    # kernels 90 % of the step: GPU-bound by the trace; NVML/GPM say how full they were
    assert plain.status == "warn" and plain.evidence["causes"] == ["gpu-bound"]
    assert "NVML did not sample the GPUs: whether the kernels filled the GPU is not " \
           "measured" in plain.message
    f = bn.bottleneck(b, None, bn.ProgramFacts(nvml_gpus=[gpu()]))
    assert f.status == "warn" and f.evidence["causes"] == ["small-kernels", "gpu-bound"]
    assert "10.0 ms per step over 2 profiled step(s) (host step markers): GPU 0 is 'busy' " \
           "with a few small kernels: NVML's utilization 100 %" in f.message
    assert f.evidence["gpm"]["gpus"][0]["sm_util_mean_percent"] == 3.0
    assert "jit_compile=True" in f.advice
    full = bn.bottleneck(b, None, bn.ProgramFacts(nvml_gpus=[gpu(util=95.0, sm=88.0)]))
    assert full.evidence["causes"] == ["gpu-bound"]
    assert "GPU 0: utilization 95 %, GPM's SM utilization 88 %" in full.message
    blind = bn.bottleneck(b, None, bn.ProgramFacts(nvml_gpus=[NO_GPM]))
    assert blind.evidence["causes"] == ["gpu-bound"]
    assert "GPU 0: GPM metrics unavailable (this GPU does not offer GPM metrics)" \
        in blind.message


def test_cpu_program_without_nvml_gets_no_gpm_text() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 9, 0, 0, 1, 0, 0)), None)
    assert "GPM" not in f.message and "NVML" not in f.message
    assert f.evidence["gpm"] == {"unavailable": "NVML did not sample the GPUs"}
    assert bottleneck_note([gpu()], gpu_trace=False).small  # fake GPUs beside a CPU trace
