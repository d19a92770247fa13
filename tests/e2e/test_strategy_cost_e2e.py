"""`gpudiag run` on a user's MirroredStrategy over two logical devices of one CPU with the
global batch left unscaled (tests/programs/mirrored_shared_cores.py, issue 46): run.strategy
says the replicas share the cores, that nothing measured the job without the strategy, and
names a cause only at or above its own threshold; the real CLI in a real child process."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

pytestmark = pytest.mark.slow

PROGRAM = TESTS_DIR / "programs" / "mirrored_shared_cores.py"


def line_of(text: str) -> str:
    lines = PROGRAM.read_text().splitlines()
    return f"{PROGRAM.name}:{next(i for i, x in enumerate(lines, 1) if text in x)}"


def test_a_strategy_on_shared_cores_is_judged_against_no_strategy(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", sys.executable, str(PROGRAM),
                   timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))
    f = found["run.strategy"]
    assert f["status"] == "warn", f["message"]
    assert "2 logical devices of one CPU" in f["message"]
    assert "16 examples a replica (global batch 32)" in f["message"]
    assert "faster or slower than one device was not measured" in f["message"]
    comm = found["run.bottleneck"]["evidence"]["shares"]["communication"]
    if comm < 0.2:  # a cause only at or above its line
        assert "communication-bound" not in f["message"]
        assert "no cause stands out" in f["message"] or "the step is" in f["message"]
    wheres = [a["where"] for a in f["actions"]]
    assert wheres == [line_of("MirroredStrategy("), line_of("model.fit(")]
    assert "strategy.num_replicas_in_sync" in f["actions"][1]["what"]
