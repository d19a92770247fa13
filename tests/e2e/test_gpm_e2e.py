"""GPM (SM utilization, occupancy; Hopper and later) beside NVML's utilization: the real
pynvml backend's GPM code against pynvml's own structures, the sampler and summaries through
the fake backend's scenarios, the scalars, and `gpudiag monitor` end to end."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from fake_nvml import NO_GPM_REASON
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

pynvml = pytest.importorskip("pynvml")


# --------------------------------------------------------------------------- end to end

BUSY_LOOP = "import time; t = time.monotonic()\nwhile time.monotonic() - t < 1.2: pass"


@pytest.mark.parametrize(("scenario", "status", "needles"), [
    ("small_kernels", "warn", ["GPU 0 is 'busy' with a few small kernels: NVML's utilization "
                               "100 % (a kernel ran), GPM's SM utilization 3 %, occupancy 2 %, "
                               "tensor cores 0 %, DRAM bandwidth 2 %"]),
    ("gpm_busy", "ok", ["GPU 0: utilization 90 %, GPM's SM utilization 85 %, occupancy 40 %"]),
    ("busy", "skip", ["GPM (Hopper and later) is unavailable here: GPU 0: GPM metrics "
                      f"unavailable ({NO_GPM_REASON})"]),
])
def test_monitor_compares_utilization_with_gpm(tmp_path: Path, scenario: str, status: str,
                                               needles: list[str]) -> None:
    proc = gpudiag("monitor", "--logdir", str(tmp_path), "--interval", "0.2", "--",
                   sys.executable, "-c", BUSY_LOOP, fake_nvml=scenario, timeout=120)
    (run_dir,) = run_dirs(tmp_path)
    report = load_report(run_dir)
    found = findings_by_id(report)["monitor.sm-utilization"]
    assert found["status"] == status, found
    for needle in needles:
        assert needle in found["message"]
    if status == "warn":
        assert proc.returncode == 0  # a warning, not a failed check
        assert "larger batch" in found["advice"]
        gpu = report["devices"]["nvml_devices"][0]
        assert gpu["sm_util_mean_percent"] == 3.0 and gpu["gpm_readings"] >= 3
        assert "gpu0/gpm_sm_util_percent" in report["data"]["nvml_tensorboard"]["tags"]
    if status == "skip":
        assert not [t for t in report["data"]["nvml_tensorboard"]["tags"] if "gpm" in t]


def test_monitor_without_nvml_has_no_gpm_finding(tmp_path: Path) -> None:
    gpudiag("monitor", "--logdir", str(tmp_path), "--", sys.executable, "-c", "pass",
            fake_nvml="no_nvml", timeout=120)
    (run_dir,) = run_dirs(tmp_path)
    found = findings_by_id(load_report(run_dir))
    assert "monitor.sm-utilization" not in found
    assert found["monitor.every-gpu-used"]["status"] == "skip"  # which says why


@pytest.mark.slow
def test_run_bottleneck_says_when_busy_means_a_few_small_kernels(tmp_path: Path) -> None:
    # A real TensorFlow program on the CPU beside the fake's GPU at 100 % utilization and
    # 3 % SM utilization: run's bottleneck carries what GPM saw, and run.sm-utilization.
    program = TESTS_DIR / "programs" / "keras_fit_tiny.py"
    proc = gpudiag("run", "--logdir", str(tmp_path), "--", sys.executable, str(program),
                   fake_nvml="small_kernels", timeout=300)
    (run_dir,) = run_dirs(tmp_path)
    found = findings_by_id(load_report(run_dir))
    assert found["run.sm-utilization"]["status"] == "warn", proc.stderr[-2000:]
    bottleneck = found["run.bottleneck"]
    assert bottleneck["status"] == "warn" and "small-kernels" in bottleneck["evidence"]["causes"]
    assert "GPU 0 is 'busy' with a few small kernels: NVML's utilization 100 % (a kernel " \
           "ran), GPM's SM utilization 3 %" in bottleneck["message"]
    assert bottleneck["evidence"]["gpm"]["gpus"][0]["sm_util_mean_percent"] == 3.0
