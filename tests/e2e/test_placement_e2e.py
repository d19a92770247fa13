"""`gpudiag placement` and `gpudiag env` end to end: real TensorFlow in real child processes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import REPO, TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import gpudiag as gpudiag_pkg

pytestmark = pytest.mark.slow
SCHEMA = json.loads((Path(gpudiag_pkg.__file__).parent / "report.schema.json").read_text())


@pytest.fixture(scope="module")
def placement_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path]:
    logdir = tmp_path_factory.mktemp("placement") / "runs"
    proc = gpudiag("placement", "--logdir", str(logdir), "--json", "--virtual-gpus", "3")
    return proc, logdir


def test_placement_json_exits_0_and_is_the_report(placement_run: tuple[Any, Path]) -> None:
    proc, logdir = placement_run
    assert proc.returncode == 0, proc.stderr[-3000:]
    printed = json.loads(proc.stdout)
    jsonschema.validate(printed, SCHEMA)
    (run_dir,) = run_dirs(logdir)
    assert printed == load_report(run_dir)
    assert printed["partial"] is False


def test_placement_table_has_ops_on_every_virtual_device(placement_run: tuple[Any, Path]) -> None:
    _, logdir = placement_run
    report = load_report(run_dirs(logdir)[0])
    counts = report["data"]["placement"]["op_counts_by_device"]
    # no GPU here: --virtual-gpus 3 gives CPU:0 (host) and CPU:1..3 as stand-ins
    assert report["devices"]["kind"] == "virtual-cpu"
    assert report["devices"]["compute_devices"] == ["/device:CPU:1", "/device:CPU:2",
                                                    "/device:CPU:3"]
    for device in ("/device:CPU:0", "/device:CPU:1", "/device:CPU:2", "/device:CPU:3"):
        assert counts.get(device, 0) >= 1, counts
    rows = report["data"]["placement"]["rows"]
    assert any(r["kind"] == "eager" for r in rows) and any(r["kind"] == "graph" for r in rows)
    stderr = Path(report["data"]["placement"]["log_file"]).read_text()
    assert "Executing op" in stderr and "placer.cc" in stderr


def test_placement_findings_observe_real_tensorflow(placement_run: tuple[Any, Path]) -> None:
    _, logdir = placement_run
    f = findings_by_id(load_report(run_dirs(logdir)[0]))
    assert f["placement.invalid-device"]["status"] == "ok"
    assert f["placement.invalid-device"]["evidence"]["error_type"] == "InvalidArgumentError"
    assert "Could not satisfy device specification" in f["placement.invalid-device"]["message"]
    assert f["placement.soft-fallback"]["status"] == "ok"
    assert f["placement.soft-fallback"]["evidence"]["actual"] == "/device:CPU:0"
    assert f["placement.pinned"]["status"] == "ok"
    assert f["placement.multitower"]["status"] == "ok"
    assert f["placement.multitower"]["evidence"]["matmul_devices"]["tower_2/MatMul"] == (
        "/device:CPU:3")
    assert f["placement.default-device"]["status"] == "warn"
    assert f["placement.no-gpu-kernel"]["status"] == "skip"


def test_placement_writes_tensorboard_text_summaries(placement_run: tuple[Any, Path]) -> None:
    _, logdir = placement_run
    acc = EventAccumulator(str(run_dirs(logdir)[0] / "report"), size_guidance={"tensors": 0})
    acc.Reload()
    tags = acc.Tags()["tensors"]
    assert {"gpudiag/report", "gpudiag/placement"} <= set(tags)
    table = acc.Tensors("gpudiag/placement")[0].tensor_proto.string_val[0].decode()
    assert "tower_1/MatMul" in table and "/device:CPU:2" in table


def test_env_reports_no_gpu_and_why_nvml_is_absent(tmp_path: Path) -> None:
    proc = gpudiag("env", "--logdir", str(tmp_path), "--json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout)
    jsonschema.validate(report, SCHEMA)
    f = findings_by_id(report)
    assert f["env.tensorflow"]["status"] in ("ok", "warn")
    assert f["env.tensorflow"]["evidence"]["tf_version"].startswith("2.")
    assert f["env.nvml"]["status"] == "skip" and f["env.nvml"]["evidence"]["reason"]
    assert f["env.tf-gpus"]["status"] == "warn"
    assert report["environment"]["tensorflow"]["logical_devices"][0]["name"] == "/device:CPU:0"


def test_ctrl_c_during_the_probe_leaves_a_partial_report(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "gpudiag", "placement", "--logdir",
                             str(tmp_path)], env=env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not list(tmp_path.glob("*/children/placement/stderr.txt")):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "partial report" in out + err
    (run_dir,) = run_dirs(tmp_path)
    report = load_report(run_dir)
    assert report["interrupted"] is True and report["partial"] is True
    assert (run_dir / "report.md").exists()


def test_child_past_its_timeout_is_a_failed_check_not_a_lost_run(tmp_path: Path) -> None:
    # TensorFlow alone takes longer than 0.5 s to import: the child is killed mid-probe.
    proc = gpudiag("placement", "--logdir", str(tmp_path), "--timeout", "0.5")
    assert proc.returncode == 1
    report = load_report(run_dirs(tmp_path)[0])
    f = findings_by_id(report)["placement.probe"]
    assert f["status"] == "fail" and f["evidence"]["timed_out"] is True
    assert "did not finish within 0.5 s" in f["message"]


def test_missing_tensorflow_is_exit_3_with_one_line(tmp_path: Path) -> None:
    shadow = TESTS_DIR / "fixture_notf"
    proc = gpudiag("placement", "--logdir", str(tmp_path),
                   env={"PYTHONPATH": os.pathsep.join([str(shadow), str(REPO)])})
    assert proc.returncode == 3, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert line.startswith("gpudiag: error: TensorFlow cannot be imported")
    report = load_report(run_dirs(tmp_path)[0])  # what was done so far is still readable
    assert report["partial"] is True
