"""`gpudiag env` with real TensorFlow in a child and NVML's side scripted by the fake backend,
given where the real backend goes: to the CLI's ``main(argv, open_nvml=...)`` (which opens
and closes it) or to ``env.run(backend=...)`` (which only uses it)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_nvml import lost_at_start, open_scenario
from helpers import findings_by_id, gpudiag, load_report, run_dirs

from gpudiag.cli import main
from gpudiag.commands import env as env_cmd
from gpudiag.session import RunSession
from gpudiag.ui import Ui

pytestmark = pytest.mark.slow


def _findings(session: RunSession) -> dict[str, object]:
    return {f.id: f for f in session.report.findings}


def test_gpus_seen_by_nvml_but_not_by_tensorflow_fail_with_tf_own_words(tmp_path: Path) -> None:
    backend = lost_at_start(n=3, lost_index=2)
    rc = main(["env", "--logdir", str(tmp_path), "--timeout", "120"], open_nvml=lambda: backend)
    (run_dir,) = run_dirs(tmp_path)
    report = load_report(run_dir)
    f = findings_by_id(report)
    assert f["env.nvml"]["status"] == "ok" and "3 GPU(s)" in f["env.nvml"]["message"]
    # the lost GPU is an error record; the other two still report
    devices = report["environment"]["nvml"]["devices"]
    assert [("error" in d) for d in devices] == [False, False, True]
    tf_gpus = f["env.tf-gpus"]
    assert tf_gpus["status"] == "fail" and "NVML sees 3" in tf_gpus["message"]
    # TensorFlow's own explanation, taken from the child's stderr
    assert any("cuda" in line.lower() for line in tf_gpus["evidence"]["tf_log"])
    assert rc == 1
    assert backend.closed  # the CLI opened it, so the CLI closed it


def test_no_nvml_is_a_skip_with_the_reason(tmp_path: Path) -> None:
    backend = open_scenario("no_nvml")
    with RunSession("env", tmp_path) as session:
        env_cmd.run(session, backend=backend, timeout_s=120, ui=Ui.quiet())
    f = _findings(session)
    assert f["env.nvml"].status == "skip" and "libnvidia-ml.so.1" in f["env.nvml"].message
    assert session.report.exit_code() == 0


def test_cuda_visible_devices_minus_one_leaves_no_gpu_visible(logdir: Path) -> None:
    # CUDA_VISIBLE_DEVICES=-1 python -m gpudiag env, on a machine whose NVML sees 2 GPUs.
    proc = gpudiag("env", "--logdir", str(logdir), "--timeout", "120", fake_nvml="busy",
                   env={"CUDA_VISIBLE_DEVICES": "-1"})
    assert proc.returncode == 1, proc.stderr  # TensorFlow sees none of NVML's 2 GPUs
    (run_dir,) = run_dirs(logdir)
    report = load_report(run_dir)
    assert report["environment"]["tensorflow"]["env"]["CUDA_VISIBLE_DEVICES"] == "-1"
    f = findings_by_id(report)
    hidden = f["env.cuda-visible-devices"]
    assert hidden["status"] == "warn"
    assert hidden["message"] == "CUDA_VISIBLE_DEVICES='-1' hides 2 of 2 GPU(s)"
    assert hidden["evidence"]["visible_by_cuda_visible_devices"] == 0
    assert hidden["evidence"]["nvml_gpu_count"] == 2
    assert f["env.tf-gpus"]["status"] == "fail"
