"""The failures before any trace exists (gpudiag/catalogue/startup.py, bfc.py): each entry
against TensorFlow's or XLA's own text, the BFC allocator's summary read as a fragmented or a
full pool, a skipped GPU named by its library, Horovod beside TensorFlow >= 2.16, a stall
that was XLA compiling. Plain data: no TensorFlow, no processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs


@pytest.mark.slow
@pytest.mark.parametrize(("variant", "steps", "said"), [((), 8, "input-ran-out"),
                                                        (("repeat",), 20, None)])
def test_a_fit_whose_input_runs_out_is_told_from_one_that_does_not(
        tmp_path: Path, variant: tuple[str, ...], steps: int, said: str | None) -> None:
    """tests/programs/fit_input_runs_out.py through `gpudiag run`: Keras's warning (a
    Python warning, caught by the hooks) is run.tf-log's input-ran-out with the .repeat()
    fix; the twin with .repeat() takes every step and gets no such entry."""
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(TESTS_DIR / "programs" / "fit_input_runs_out.py"),
                   *variant, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert f"steps: {steps}" in proc.stdout
    (run_dir,) = run_dirs(logdir)
    tf_log = findings_by_id(load_report(run_dir))["run.tf-log"]
    ids = [m["id"] for m in tf_log["evidence"]["matches"]]
    if said is None:
        assert "input-ran-out" not in ids, ids
    else:
        assert said in ids and tf_log["status"] == "warn", tf_log
        assert ".repeat()" in tf_log["advice"]
