"""`gpudiag diff A B` end to end: real `gpudiag run`s of an input-bound Keras fit and the
same fit with tf.data's fixes (tests/programs/input_pipeline_fit.py, profiled in its
second epoch: the golden pair of tests/golden.py), the diff read back with gpudiag.rundir;
a run against itself; bad input."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from golden import GoldenRuns
from helpers import assert_usage_error, gpudiag, run_dirs

from gpudiag import layout
from gpudiag.layout.diff import DiffRecord
from gpudiag.rundir import load_run


@pytest.fixture
def pair(pipeline_pair: GoldenRuns, tmp_path: Path) -> tuple[Path, Path, Path]:
    """The golden pair (tests/golden.py) and this test's own logdir for what diff writes."""
    a, b = pipeline_pair.run_dirs
    return tmp_path / "runs", a, b


def test_the_fix_made_the_input_part_go_down_with_its_interval(
        pair: tuple[Path, Path, Path]) -> None:
    logdir, a, b = pair
    proc = gpudiag("diff", "--json", "--logdir", str(logdir), str(a), str(b))
    assert proc.returncode == 0, proc.stderr[-2000:]
    printed = json.loads(proc.stdout)
    (diff_dir,) = [p for p in run_dirs(logdir) if p.name.endswith("-diff")]
    run = load_run(diff_dir)
    assert run.command == "diff" and run.report_json == printed
    rec = DiffRecord.from_dict(run.report.data[layout.DIFF_DATA_KEY])
    (loop,) = rec.loops
    assert loop.verdict == "faster" and loop.ratio_high is not None and loop.ratio_high < 1
    (neck,) = rec.bottlenecks
    assert neck.before == "input-bound"
    b_input = ((load_run(b).finding("run.bottleneck") or {}).get("evidence", {})
               .get("cause_evidence", {}).get("input-bound") or {}).get("against") or {}
    # fixed or moved; or, with both cores busy, B's smaller input share judged near its
    # line (20 %, from 1 %-61 % over its 4 profiled steps): still there, but only near it
    assert neck.outcome in ("fixed", "moved") or (
        neck.outcome == "still there" and b_input.get("side") == "near"), neck
    inp = {p.part: p for p in neck.parts}["input"]
    assert inp.b_s < inp.a_s / 2
    assert neck.changed_most is not None and neck.changed_most.endswith("input")
    # the prediction A's finding made, beside B's measured step; both kept
    assert neck.predicted is not None and neck.predicted["cause"] == "input-bound"
    assert neck.predicted_step_s and neck.measured_step_s and neck.error is not None
    # one prediction per fix: B made every fix A's finding advised, and is held to the
    # step A's run said those fixes give (its first sized action, on the loop's step)
    said = next(x["predicted"] for x in load_run(a).finding("run.bottleneck")["actions"]
                if (x["predicted"] or {}).get("step_s"))
    assert said["step_s"] == pytest.approx(neck.predicted_step_s, rel=1e-9), (said, neck)
    assert (said["low_s"], said["high_s"]) == pytest.approx(
        (neck.predicted_low_s, neck.predicted_high_s), rel=1e-9)
    finding = run.finding("diff.bottleneck.run.bottleneck")
    assert finding is not None and "predicted " in finding["message"] and \
        "measured " in finding["message"]
    assert (diff_dir / layout.REPORT_MD).is_file()


def test_a_run_against_itself_is_no_change(pair: tuple[Path, Path, Path]) -> None:
    logdir, a, _ = pair
    proc = gpudiag("diff", "--json", "--logdir", str(logdir), str(a), str(a))
    assert proc.returncode == 0, proc.stderr[-2000:]
    rec = DiffRecord.from_dict(json.loads(proc.stdout)["data"][layout.DIFF_DATA_KEY])
    assert [d.verdict for d in rec.loops] == ["no change"]
    # the one bottleneck is still there, or (where the profiled window waited for input
    # longer than the run's steady step, as on a loaded machine) said not to be compared
    assert [n.outcome for n in rec.bottlenecks] in (["still there"], ["unsteady"])


def test_the_terminal_verdict_says_what_became_of_the_bottleneck(
        pair: tuple[Path, Path, Path]) -> None:
    logdir, a, b = pair
    proc = gpudiag("diff", "--logdir", str(logdir), str(a), str(b))
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("bottleneck: ")]
    # what became of A's bottleneck, with the step before and after (its title)
    assert re.match(r"bottleneck: (\S+ fixed|moved: |still |\S+ appeared in B)", line), line
    assert "none stands out" not in line
    assert len(line) <= 80


def test_a_path_that_is_not_a_run_is_one_line_exit_2(tmp_path: Path,
                                                     pair: tuple[Path, Path, Path]) -> None:
    _, a, _ = pair
    logdir = tmp_path / "runs"
    proc = gpudiag("diff", "--logdir", str(logdir), str(a), str(tmp_path))
    assert_usage_error(proc, "not a gpudiag run directory", logdir)
    proc = gpudiag("diff", "--logdir", str(logdir), str(tmp_path / "missing"), str(a))
    assert_usage_error(proc, "not a gpudiag run directory", logdir)
