"""`gpudiag explain` on real GPU traces from public repositories (tests/data/gpu_traces/,
each with its source and its truth, computed from the raw XSpace by
benchmarks/gpu_trace_truth.py, in the README beside it), run as a user runs it; and one
breakdown per trace: explain on a scaling run's trace reads it as scaling does."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import REPO, TESTS_DIR, gpudiag, load_report, run_dirs

from gpudiag import layout
from gpudiag.readers import stepbreakdown
from gpudiag.rundir import load_run

DATA = TESTS_DIR / "data" / "gpu_traces"
BERT_DIR = TESTS_DIR / "data" / "xprof_demo_gpu_multi_worker"
BOUNDS = {"gpu-bound", "launch-bound", "copy-bound", "input-bound", "host-bound",
          "communication-bound", "overhead-bound"}


def explained(tmp: Path, path: Path) -> dict:
    """explain's one bottleneck finding on PATH, from its report.json."""
    logdir = tmp / "runs"
    proc = gpudiag("explain", "--logdir", str(logdir), str(path), timeout=240)
    assert proc.returncode in (0, 1), proc.stderr
    (run_dir,) = run_dirs(logdir)
    report = load_report(run_dir)
    (f,) = [f for f in report["findings"] if f["id"].startswith("explain.bottleneck")]
    return f


def test_a_launch_bound_step_is_named_with_its_kernel_numbers_and_fix(tmp_path: Path) -> None:
    # truth (README): GPU busy 13.8 %, 100 kernels per step, median 3.7 us, tf.data 1 %
    f = explained(tmp_path, DATA / "rtx5000_launch_bound")
    assert f["status"] == "warn" and f["evidence"]["causes"] == ["launch-bound"]
    assert f["evidence"]["steps_from"] == "host step markers" and f["evidence"]["steps"] == 18
    k = f["evidence"]["kernels"]["/device:GPU:0"]
    assert k["per_step"] == pytest.approx(100) and k["median_s"] == pytest.approx(3.7e-6,
                                                                                   abs=0.1e-6)
    assert f["evidence"]["shares"]["compute"] == pytest.approx(0.138, abs=0.005)
    assert f["evidence"]["shares"]["input"] < 0.02
    assert "launch-bound: inside the step the GPU waits 84 % of the step" in f["message"]
    assert "100 kernels per step, median 3.7 us" in f["message"]
    assert "a larger batch" in f["advice"] and "jit_compile=True" in f["advice"]
    assert "steps_per_execution" in f["advice"]


def test_host_to_device_copies_are_their_own_part_never_input(tmp_path: Path) -> None:
    # truth: H2D 2.244 ms of a 10.34 ms step (21.7 %), tf.data 0.5 %, kernels 44.5 %
    f = explained(tmp_path, DATA / "rtx5000_copy_heavy")
    causes = f["evidence"]["causes"]
    assert "copy-bound" in causes and "input-bound" not in causes
    assert f["evidence"]["shares"]["copy"] == pytest.approx(0.217, abs=0.01)
    assert f["evidence"]["shares"]["input"] < 0.01
    assert "copies per step: H2D 2.24 ms" in f["message"]
    assert "prefetch_to_device" in f["advice"]
    assert "moderately input-bound" not in f["message"]


def test_a_gpu_bound_step_is_named_with_its_top_kernels_precision_and_fix(tmp_path: Path
                                                                          ) -> None:
    # truth (README): one step of 406.03 ms (the GPU's Steps line: no host marker), kernels
    # 89.6 % of it, 1158 kernels, H2D 7.1 %, tf.data 0 %; float32 on a V100
    f = explained(tmp_path, DATA / "v100_gpu_bound")
    assert f["status"] == "warn" and f["evidence"]["causes"] == ["gpu-bound"]
    assert f["evidence"]["steps_from"] == "device Steps line" and f["evidence"]["steps"] == 1
    assert f["evidence"]["step_s"] == pytest.approx(0.40603, abs=1e-4)
    shares = f["evidence"]["shares"]
    assert shares["compute"] == pytest.approx(0.896, abs=0.005)
    assert shares["copy"] == pytest.approx(0.071, abs=0.005) and shares["input"] < 0.01
    assert f["evidence"]["kernels"]["/device:GPU:0"]["per_step"] == pytest.approx(1158)
    assert "GPU-bound: the GPU runs kernels 90 % of the step (364 ms of 406 ms)" in \
        f["message"]
    assert "top ops: Conv2DBackpropFilter" in f["message"]
    assert "float16/bfloat16 kernels 0 % of kernel time" in f["message"]
    assert "mixed_float16" in f["advice"] and "jit_compile=True" in f["advice"]
    assert "a larger batch" in f["advice"]


def test_an_input_bound_step_is_named_with_its_wait_and_the_stage_it_waited_in(
        tmp_path: Path) -> None:
    # truth: one step of 3758.41 ms; tf.data's iterator 2339.28 ms of it (62.2 %), kernels
    # 34.6 %, H2D 0.7 %; it waited in Iterator::Model::MaxIntraOpParallelism::Map::Prefetch
    f = explained(tmp_path, DATA / "t4_input_bound")
    assert f["status"] == "warn" and f["evidence"]["causes"] == ["input-bound"]
    assert f["evidence"]["step_s"] == pytest.approx(3.75841, abs=1e-4)
    shares = f["evidence"]["shares"]
    assert shares["input"] == pytest.approx(0.622, abs=0.005)
    assert shares["compute"] == pytest.approx(0.346, abs=0.005) and shares["copy"] < 0.01
    assert "input-bound: 62 % of the step (2339 ms of 3758 ms) waits for input" in \
        f["message"]
    assert "Iterator::Model::MaxIntraOpParallelism::Map::Prefetch" in f["advice"]
    assert "the prefetch's buffer was empty when the step asked for its batch" in f["advice"]
    assert "num_parallel_calls=tf.data.AUTOTUNE" in f["advice"]
    assert "ImageDataGenerator" in f["advice"]


def test_a_step_whose_gpu_waits_outside_the_step_call_is_host_bound_not_launch_bound(
        tmp_path: Path) -> None:
    # truth: one step of 66.56 ms (the GPU's Steps line); the host's call of the step
    # function ends 9.8 ms into it; outside the call with no kernel, copy or tf.data wait:
    # 81.5 %; kernels 10.2 %, H2D 4.4 %, tf.data 0 %
    f = explained(tmp_path, DATA / "v100_host_bound")
    assert f["status"] == "warn" and f["evidence"]["causes"] == ["host-bound"]
    assert f["evidence"]["step_s"] == pytest.approx(0.066561, abs=1e-5)
    shares = f["evidence"]["shares"]
    assert shares["host_between_calls"] == pytest.approx(0.815, abs=0.005)
    assert shares["compute"] == pytest.approx(0.102, abs=0.005) and shares["launch"] < 0.05
    assert shares["input"] < 0.01
    assert "host-bound: 82 % of the step (54.2 ms of 66.6 ms) is the host after the step " \
        "call returned" in f["message"]
    assert "launch-bound" not in f["message"]
    assert "steps_per_execution=N" in f["advice"] and "per-batch callbacks" in f["advice"]


def test_a_gpu_plane_without_kernels_claims_no_bound(tmp_path: Path) -> None:
    # truth: the GPU plane holds no event; the host's markers give a 31.98 ms step
    f = explained(tmp_path, DATA / "rtx5000_empty_gpu_plane")
    assert f["status"] == "warn" and f["evidence"]["causes"] == ["no-gpu-kernels"]
    assert not BOUNDS & set(f["evidence"]["causes"])
    assert f["message"].startswith("32.0 ms per step over 18 profiled step(s) (host step "
                                   "markers): no GPU recorded a kernel")
    assert "CUPTI" in f["message"] and "no bound is claimed" in f["message"]
    assert "set_log_device_placement" in f["advice"]


def test_no_trace_of_the_test_data_gets_a_bound_it_does_not_have(tmp_path: Path) -> None:
    # the public 8-GPU BERT trace: GPU 4 and 6 run kernels 70-75 % of their step, start it
    # 648 ms apart, 6 GPUs idle: a straggler and idle GPUs, not GPU/launch/copy/input-bound
    f = explained(tmp_path / "bert", BERT_DIR)
    assert f["evidence"]["causes"] == ["straggler", "idle-gpus"]
    wrong = {"rtx5000_launch_bound": {"gpu-bound", "copy-bound", "input-bound", "host-bound"},
             "rtx5000_copy_heavy": {"gpu-bound", "input-bound", "host-bound"}}
    for name, never in wrong.items():
        g = explained(tmp_path / name, DATA / name)
        assert not never & set(g["evidence"]["causes"]), (name, g["evidence"]["causes"])


def test_explain_reads_a_scaling_runs_trace_as_scaling_does(tmp_path: Path) -> None:
    # one breakdown per trace: the placement and replicas that run recorded (its
    # 4-device child's result, read through load_run) split the virtual CPU devices, as
    # in `scaling`
    (run,) = (REPO / "sample_runs" / "scaling").glob("*-scaling")
    trace = next((run / "towers-4dev").rglob("*.xplane.pb"))
    child = load_run(run).children[layout.count_child_name(4)].result
    assert child is not None
    (train,) = [o["result"]["train"] for o in child["result"]["outcomes"]
                if o["strategy"] == "towers"]
    scaling = stepbreakdown.breakdown(trace, train["op_devices"], train["devices"],
                                      with_xprof=False)
    f = explained(tmp_path, run / "towers-4dev")
    parts = f["evidence"]["parts_s"]
    assert set(f["evidence"]["devices"]) == set(train["devices"])  # the 4 replicas judged
    for d in scaling.devices:
        mean = d.mean()
        assert mean is not None
        assert parts[d.device]["compute_s"] == pytest.approx(mean.compute_s)
        assert parts[d.device]["idle_s"] == pytest.approx(mean.idle_s)


def test_a_cpu_trace_without_recorded_placement_says_devices_are_not_told_apart(
        tmp_path: Path) -> None:
    (run,) = (REPO / "sample_runs" / "scaling").glob("*-scaling")
    alone = tmp_path / "alone"
    trace = next((run / "towers-4dev").rglob("*.xplane.pb"))
    (alone / "plugins" / "profile" / "x").mkdir(parents=True)
    (alone / "plugins" / "profile" / "x" / trace.name).write_bytes(trace.read_bytes())
    f = explained(tmp_path, alone)
    assert list(f["evidence"]["devices"]) == ["/host:CPU"]
    assert "devices are not told apart" in f["message"]
