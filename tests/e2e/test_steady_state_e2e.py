"""One steady-state rule (gpudiag.verdicts.run.throughput.steady): run.throughput and
`gpudiag diff` give the same median step for the same run, a custom loop's as a Keras
fit's (the step time in TensorBoard is the period between step starts for every loop)."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import findings_by_id, gpudiag, load_report, run_dirs

from gpudiag import layout


@pytest.mark.slow
@pytest.mark.parametrize("golden", ["custom_loop", "fit_tiny"])
def test_run_throughput_and_diff_give_the_same_median_step(
        tmp_path: Path, golden: str, request: pytest.FixtureRequest) -> None:
    (run_dir,) = request.getfixturevalue(golden).run_dirs  # tests/golden.py
    (loop,) = findings_by_id(load_report(run_dir))["run.throughput"]["evidence"]["loops"]
    diffs = tmp_path / "diffs"
    proc = gpudiag("diff", "--logdir", str(diffs), str(run_dir), str(run_dir))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (diff_dir,) = run_dirs(diffs)
    (d,) = load_report(diff_dir)["data"][layout.DIFF_DATA_KEY]["loops"]
    assert d["a"]["median_s"] == pytest.approx(loop["step_s_median"], rel=1e-9)
    assert d["a"]["steps"] == loop["timed_steps"]
    assert d["verdict"] == "no change" and d["level"] == 0.95
