"""`gpudiag explain PATH` through the real CLI: traces that already exist, nothing run, no
TensorFlow, no GPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import jsonschema
from helpers import (
    REPO,
    TESTS_DIR,
    breakdown_picture,
    findings_by_id,
    gpudiag,
    load_report,
    run_dirs,
)

from gpudiag import layout

BERT_DIR = TESTS_DIR / "data" / "xprof_demo_gpu_multi_worker"
SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())


def explain(tmp: Path, path: Path) -> tuple[int, dict, Path]:
    logdir = tmp / "runs"
    proc = gpudiag("explain", "--logdir", str(logdir), str(path), timeout=180)
    (run_dir,) = run_dirs(logdir)
    report = load_report(run_dir)
    jsonschema.validate(report, SCHEMA)
    return proc.returncode, report, run_dir


def test_the_public_8_gpu_trace_lists_all_8_gpus_and_names_the_6_idle(tmp_path: Path) -> None:
    # as a user has it: a logdir with plugins/profile/<run>/<host>.xplane.pb
    profile = tmp_path / "logdir" / "plugins" / "profile" / "2020_12_23"
    profile.mkdir(parents=True)
    shutil.copy(BERT_DIR / "34.83.195.179_6003.xplane.pb", profile)
    code, report, run_dir = explain(tmp_path, tmp_path / "logdir")
    assert code == 0  # warnings, no failed check: exit 0 like every other command
    f = findings_by_id(report)["explain.bottleneck"]
    assert f["status"] == "warn"
    idle = [f"/device:GPU:{i}" for i in (0, 1, 2, 3, 5, 7)]
    assert "6 of the 8 GPUs ran no kernel in the window (" + ", ".join(idle) + ")" \
        in f["message"]
    assert "idle-gpus" in f["evidence"]["causes"] and "straggler" in f["evidence"]["causes"]
    assert f["evidence"]["steps_from"] == "device Steps line"
    (trace,) = report["data"]["explain"]["traces"]
    assert [d["device"] for d in trace["devices"]] == [f"/device:GPU:{i}" for i in range(8)]
    assert sorted(p.name for p in profile.iterdir()) == ["34.83.195.179_6003.xplane.pb"]
    assert "explain.bottleneck" in (run_dir / layout.REPORT_MD).read_text()
    # TensorBoard: a bar per GPU, the 6 idle ones too; the finding is the first text card
    assert list(f["evidence"]["parts_s"]) == [f"/device:GPU:{i}" for i in range(8)]
    _, height, _, text = breakdown_picture(run_dir)
    assert height > 400  # eight rows
    assert text.startswith("- **WARN** `explain.bottleneck`: ") and "6 of the 8 GPUs" in text


def test_a_bad_path_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for bad in (tmp_path / "missing", REPO / "README.md", tmp_path):
        proc = gpudiag("explain", "--logdir", str(tmp_path / "runs"), str(bad))
        assert proc.returncode == 2, proc.stderr
        assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("gpudiag: error: ")
        assert "Traceback" not in proc.stderr
    assert not (tmp_path / "runs").exists()  # nothing written for a bad PATH


def test_profile_data_of_the_older_format_is_named_not_read(tmp_path: Path) -> None:
    # what the profiler wrote before XSpace traces (tensorflow/profiler's 2020 demo logdir
    # has these names): told apart from an empty directory, one line, exit 2
    profile = tmp_path / "logdir" / "plugins" / "profile" / "GPU-input-bound"
    profile.mkdir(parents=True)
    for name in ("localhost.trace.json.gz", "localhost.overview_page.pb",
                 "localhost.input_pipeline.pb"):
        (profile / name).write_bytes(b"\0")
    proc = gpudiag("explain", "--logdir", str(tmp_path / "runs"), str(tmp_path / "logdir"))
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert "only profile data of the older format (localhost.input_pipeline.pb, " \
        "localhost.overview_page.pb, localhost.trace.json.gz)" in proc.stderr
    assert "TensorFlow 2.4 and later" in proc.stderr


def test_a_keras_fit_profiled_by_its_own_tensorboard_callback_has_its_steps(
        tmp_path: Path) -> None:
    # Keras 3's callback marks each profiled step "Profiled batch": batches 3 to 7 give 4
    # start-to-start periods, not the whole trace as one step
    logs = tmp_path / "logs"
    subprocess.run([sys.executable, str(TESTS_DIR / "programs" / "keras_tensorboard_profile.py"),
                    str(logs)], check=True, capture_output=True, timeout=300)
    code, report, _ = explain(tmp_path, logs)
    assert code == 0
    f = findings_by_id(report)["explain.bottleneck"]
    assert f["evidence"]["steps_from"] == "host step markers", f["message"]
    assert "over 4 profiled step(s) (host step markers)" in f["message"]
