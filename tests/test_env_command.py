"""`gpudiag env` with real TensorFlow in a child and NVML's side scripted by the fake backend."""

from __future__ import annotations

from pathlib import Path

import pytest
from fake_nvml import lost_at_start, open_scenario

from gpudiag.commands import env as env_cmd
from gpudiag.session import RunSession

pytestmark = pytest.mark.slow


def _findings(session: RunSession) -> dict[str, object]:
    return {f.id: f for f in session.report.findings}


def test_gpus_seen_by_nvml_but_not_by_tensorflow_fail_with_tf_own_words(tmp_path: Path) -> None:
    backend = lost_at_start(n=3, lost_index=2)
    with RunSession("env", tmp_path) as session:
        env_cmd.run(session, timeout_s=120, open_nvml=lambda: backend)
    f = _findings(session)
    assert f["env.nvml"].status == "ok" and "3 GPU(s)" in f["env.nvml"].message
    # the lost GPU is an error record; the other two still report
    devices = session.report.environment["nvml"]["devices"]
    assert [("error" in d) for d in devices] == [False, False, True]
    tf_gpus = f["env.tf-gpus"]
    assert tf_gpus.status == "fail" and "NVML sees 3" in tf_gpus.message
    # TensorFlow's own explanation, taken from the child's stderr
    assert any("cuda" in line.lower() for line in tf_gpus.evidence["tf_log"])
    assert session.report.exit_code() == 1
    assert backend.closed


def test_no_nvml_is_a_skip_with_the_reason(tmp_path: Path) -> None:
    with RunSession("env", tmp_path) as session:
        env_cmd.run(session, timeout_s=120, open_nvml=lambda: open_scenario("no_nvml"))
    f = _findings(session)
    assert f["env.nvml"].status == "skip" and "libnvidia-ml.so.1" in f["env.nvml"].message
    assert session.report.exit_code() == 0
