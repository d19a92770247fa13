"""`gpudiag run` on the multi-worker Keras tutorial's fit under tf_keras, two workers on one
machine (tests/programs/mwms_tf_keras_fit.py, issue 46): tf_keras's batch logs are summed
over the 2 replicas; run.learning judges each worker's loss per replica (it learns) and
never from the summed level (2 x ln 10 at the start). The real CLI, real processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, gpudiag, load_report, run_dirs

pytestmark = pytest.mark.slow


def test_a_tf_keras_multi_worker_fit_is_judged_per_replica(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(TESTS_DIR / "programs" / "mwms_tf_keras_fit.py"),
                   timeout=400)
    assert proc.returncode == 0, proc.stderr[-2000:]
    learning = [f for run_dir in run_dirs(logdir) for f in load_report(run_dir)["findings"]
                if f["id"].startswith("run.learning")]
    assert len(learning) == 2  # one per worker
    for f in learning:
        (loop,) = f["evidence"]["loops"]
        assert loop["loss_divided_by"] == 2, f["message"]
        assert "summed over its 2 replicas" in f["message"]
        assert loop["first_loss"] < 2.5  # per replica: about ln 10, not 2 x ln 10
        assert f["status"] == "ok" and loop["cause"] is None, f["message"]
        assert "ln 10" not in f["title"]
