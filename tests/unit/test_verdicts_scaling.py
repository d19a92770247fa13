"""Scaling verdicts with plain data: efficiency, its explanation, device work, learning."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import AllreduceResult, AllreduceRow
from gpudiag.report import Finding
from gpudiag.verdicts import scaling as v
from gpudiag.verdicts import scaling_learning as sl

MIB = 1 << 20


def point(strategy: str, n: int, eps: float, batch: int = 32,
          **extra: float) -> v.ThroughputPoint:
    return v.ThroughputPoint(strategy=strategy, n_devices=n, name=f"{strategy}-{n}dev",
                             examples_per_s=eps, step_s=batch * n / eps, **extra)


def test_thresholds_per_device_count() -> None:
    assert [v.efficiency_threshold(n) for n in (2, 3, 4, 5, 8, 16)] == \
        [0.95, 0.93, 0.93, 0.90, 0.90, 0.90]


def test_scaling_rows_speedup_and_efficiency() -> None:
    rows = v.scaling_rows([point("towers", 1, 1000), point("towers", 2, 1900),
                           point("towers", 4, 3000), point("mirrored", 2, 500)])
    by = {(r.strategy, r.n_devices): r for r in rows}
    assert by[("towers", 2)].speedup == pytest.approx(1.9)
    assert by[("towers", 2)].efficiency == pytest.approx(0.95)
    assert by[("towers", 4)].efficiency == pytest.approx(0.75)
    assert by[("mirrored", 2)].efficiency is None  # no 1-device base for mirrored


def test_lower_bound_is_ring_allreduce_time() -> None:
    # 100 MB over 4 devices at 10 GB/s: 100e6 * 2 * 3 / 4 / 10e9 = 15 ms
    assert v.allreduce_lower_bound_s(100_000_000, 4, 10e9) == pytest.approx(0.015)
    assert v.allreduce_lower_bound_s(100_000_000, 1, 10e9) == 0.0


def gpu_finding(points, **kw):
    args = {"gradient_bytes": 4 * MIB, "busbw_bytes_per_s": 50e9, "batch_per_device": 64,
            "variables_on": "device"}
    args.update(kw)
    return v.scaling_efficiency("towers", v.scaling_rows(points), "gpu", **args)


def test_gpu_scaling_at_threshold_is_ok() -> None:
    f = gpu_finding([point("towers", 1, 1000), point("towers", 2, 1960),
                     point("towers", 4, 3800)])
    assert f.status == "ok"
    assert "x1.96" in f.message and "efficiency 0.95" in f.message


def test_gpu_scaling_below_threshold_warns_with_communication_share() -> None:
    # step(1) = 64/1000 = 64 ms; step(2) = 128/1500 = 85.3 ms: 21.3 ms lost per step.
    # The all-reduce of 4 MiB over 2 devices at 1 GB/s needs >= 4.19 ms: ~20 % of it.
    f = gpu_finding([point("towers", 1, 1000, batch=64), point("towers", 2, 1500, batch=64)],
                    busbw_bytes_per_s=1e9)
    assert f.status == "warn"
    assert "below threshold at 2 devices 0.75 (ok from 0.95)" in f.message
    entry = f.evidence["per_device_count"][0]
    assert entry["lost_s_per_step"] == pytest.approx(0.128 / 1.5 - 0.064)
    assert entry["allreduce_lower_bound_s"] == pytest.approx(4 * MIB / 1e9)
    assert entry["communication_explains_fraction"] == pytest.approx(
        (4 * MIB / 1e9) / (0.128 / 1.5 - 0.064))
    assert "20 % of the 21.33 ms lost per step" in f.message
    assert "None of the causes" not in f.message


def test_causes_and_fixes_follow_the_evidence() -> None:
    input_bound = gpu_finding([point("towers", 1, 1000),
                               point("towers", 2, 1200, input_wait_fraction=0.4)])
    assert "40 % of the traced steps waited for input" in input_bound.message
    assert "prefetch" in input_bound.advice
    # a gradient so large against the step that averaging dominates: small batch
    small_batch = gpu_finding([point("towers", 1, 1000, batch=4),
                               point("towers", 2, 1200, batch=4)],
                              gradient_bytes=400 * MIB, batch_per_device=4)
    assert "per-device batch of 4 is too small" in small_batch.message
    assert "--batch-per-device" in small_batch.advice
    on_cpu = gpu_finding([point("towers", 1, 1000), point("towers", 2, 1200)],
                         variables_on="cpu")
    assert "variables live on the CPU" in on_cpu.message
    assert "--variables-on device" in on_cpu.advice
    nothing = gpu_finding([point("towers", 1, 1000), point("towers", 2, 1200)],
                          busbw_bytes_per_s=None)
    assert "None of the causes gpudiag measures" in nothing.message
    assert nothing.evidence["per_device_count"][0]["communication_explains_fraction"] is None


def test_shared_devices_warn_that_efficiency_is_not_meaningful() -> None:
    rows = v.scaling_rows([point("mirrored", 1, 1000), point("mirrored", 2, 2000),
                           point("mirrored", 4, 4000)])
    for kind in ("virtual-cpu", "virtual-gpu"):
        f = v.scaling_efficiency("mirrored", rows, kind, gradient_bytes=MIB,
                                 busbw_bytes_per_s=1e9, batch_per_device=32,
                                 variables_on="mirrored")
        assert f.status == "warn"  # even perfect numbers: not meaningful, not ok
        assert "Not meaningful" in f.message and "sharing the same cores" in f.message
        assert "efficiency 1.00" in f.message


def test_efficiency_skips_without_a_base() -> None:
    rows = v.scaling_rows([point("towers", 2, 1000)])
    f = v.scaling_efficiency("towers", rows, "gpu", gradient_bytes=MIB, busbw_bytes_per_s=None,
                             batch_per_device=32, variables_on="cpu")
    assert f.status == "skip"


def test_device_work_names_the_idle_device() -> None:
    devices = ["/device:GPU:0", "/device:GPU:1"]
    ok = v.device_work("towers-2dev", devices, {"/device:GPU:0": 70, "/device:GPU:1": 70},
                       {"/device:GPU:0": 0.02, "/device:GPU:1": 0.019}, trace_window_s=0.05)
    assert ok.status == "ok" and "GPU:1 busy 19.0 ms" in ok.message
    by_trace = v.device_work("towers-2dev", devices, {"/device:GPU:0": 70, "/device:GPU:1": 70},
                             {"/device:GPU:0": 0.02, "/device:GPU:1": 0.0})
    assert by_trace.status == "fail"
    assert "/device:GPU:1 did no work" in by_trace.message
    assert "no work in the trace on /device:GPU:1" in by_trace.message
    by_placement = v.device_work("mirrored-2dev", devices, {"/device:GPU:0": 140}, None,
                                 trace_reason="no profiler window")
    assert by_placement.status == "fail" and "no ops placed on /device:GPU:1" in \
        by_placement.message
    nothing = v.device_work("keras-2dev", devices, None, None, trace_reason="no trace")
    assert nothing.status == "skip"


def run(name: str, loss: float | None, acc: float | None,
        classes: int = 10) -> sl.LearningRow:
    return sl.LearningRow(name=name, num_classes=classes, steps=100, initial_loss=2.31,
                         final_loss=loss, final_accuracy=acc)


def test_learning_fails_on_the_stuck_symptom_and_passes_when_learning() -> None:
    ok = sl.learning([run("towers-1dev", 0.12, 0.97), run("towers-2dev", 0.2, 0.95)])
    assert ok.status == "ok"
    stuck = sl.learning([run("towers-1dev", 0.12, 0.97), run("towers-2dev", 2.3026, 0.10)])
    assert stuck.status == "fail"
    assert "towers-2dev: loss 2.3026 (ln 10 = 2.3026" in stuck.message
    assert "accuracy 0.10 (chance 0.10" in stuck.message
    assert "towers-1dev" not in stuck.message
    assert "learning rate" in stuck.advice
    assert [r["learned"] for r in stuck.evidence["runs"]] == [True, False]
    diverged = sl.learning([run("mirrored-4dev", None, 0.1)])
    assert diverged.status == "fail" and "NaN (diverged)" in diverged.message


def test_learning_thresholds_scale_with_the_class_count() -> None:
    # 2 classes: ln 2 = 0.693 -> loss must be <= 0.554; accuracy >= 0.55
    assert sl.learning([run("a", 0.5, 0.6, classes=2)]).status == "ok"
    assert sl.learning([run("a", 0.6, 0.6, classes=2)]).status == "fail"
    assert sl.learning([run("a", 0.5, 0.52, classes=2)]).status == "fail"
    assert math.isclose(sl.learning([run("a", 0.5, 0.6, classes=2)])
                        .evidence["runs"][0]["min_final_accuracy"], 0.55)


def test_towers_vs_mirrored_side_by_side() -> None:
    rows = v.scaling_rows([point("towers", 1, 1000), point("mirrored", 1, 1000),
                           point("towers", 2, 1500), point("mirrored", 2, 1900)])
    f = v.towers_vs_mirrored(rows)
    assert f.status == "warn" and "towers 1,500 vs mirrored 1,900" in f.message
    assert [p["n_devices"] for p in f.evidence["pairs"]] == [1, 2]
    rows = v.scaling_rows([point("towers", 1, 1000), point("mirrored", 1, 1050),
                           point("towers", 2, 1950), point("mirrored", 2, 1900)])
    assert v.towers_vs_mirrored(rows).status == "ok"
    assert v.towers_vs_mirrored(v.scaling_rows([point("towers", 1, 10)])).status == "skip"


def test_allreduce_finding_says_what_the_numbers_are() -> None:
    setup = DeviceSetup(kind="virtual-cpu", host_device="/device:CPU:0",
                        compute_devices=[f"/device:CPU:{i}" for i in range(1, 5)],
                        logical_devices=[f"/device:CPU:{i}" for i in range(5)])
    result = AllreduceResult(setup=setup, n_devices=4, cross_device_ops="ReductionToOneDevice",
                             rows=[
        AllreduceRow(size_bytes=MIB, time_s=0.001, algbw_bytes_per_s=MIB / 0.001,
                     busbw_bytes_per_s=1.5 * MIB / 0.001, iters=20),
        AllreduceRow(size_bytes=4 * MIB, time_s=0.002, algbw_bytes_per_s=4 * MIB / 0.002,
                     busbw_bytes_per_s=1.5 * 4 * MIB / 0.002, iters=20),
    ])
    cpu = v.allreduce_bandwidth(result, "virtual-cpu")
    assert cpu.status == "ok" and "host-memory numbers" in cpu.message
    assert "peak bus bandwidth 3.15 GB/s at 4 MiB" in cpu.message
    assert cpu.evidence["peak_busbw_bytes_per_s"] == pytest.approx(1.5 * 4 * MIB / 0.002)
    gpu = v.allreduce_bandwidth(replace(result, cross_device_ops="NcclAllReduce"), "gpu")
    assert "host-memory" not in gpu.message
    one = replace(result, n_devices=1, rows=[])
    assert v.allreduce_bandwidth(one, "gpu").status == "skip"


def test_an_efficiency_whose_interval_crosses_its_threshold_is_a_warn_saying_near() -> None:
    """2 GPUs at 0.95: the timed steps' spread gives the efficiency an interval (the ratio
    of the two median step times at 95 %); one across 0.95 is "near the threshold", a warn
    whether the median fell at 0.96 or 0.94; steps clear of it decide."""
    def timed(step_s: float, spread: float) -> tuple[float, ...]:
        return tuple(step_s * (1 + spread * (i - 10) / 10) for i in range(21))

    def run(eff: float, spread: float) -> Finding:
        one = point("towers", 1, 1000)
        two = point("towers", 2, 2000 * eff)
        one = replace(one, timed_step_s=timed(one.step_s or 0, spread))
        two = replace(two, timed_step_s=timed(two.step_s or 0, spread))
        return gpu_finding([one, two])

    for eff in (0.94, 0.96):
        f = run(eff, 0.10)
        assert f.status == "warn" and "near the threshold: " in f.message
        assert "threshold 0.95" in f.message
        (entry,) = f.evidence["per_device_count"]
        assert entry["against"]["side"] == "near"
    clear = run(0.99, 0.01)
    assert clear.status == "ok"
    below = run(0.80, 0.01)
    assert below.status == "warn" and "near the" not in below.message
    assert "below threshold at 2 devices 0.80 (ok from 0.95)" in below.message
