"""The GPUDIAG tab agrees with itself (issue 44): what one card says of a run, another
card of the same run says with the same numbers (gpudiag.tbplugin.views, on the recorded
sample runs; no process, no TensorFlow)."""

from __future__ import annotations

import html
import json
import shutil
from pathlib import Path

import pytest
from helpers import REPO

from gpudiag.layout.diff import BottleneckDiff, DiffRecord, LoopDiff, Median
from gpudiag.layout.units import duration, share
from gpudiag.notebook.display import Diagnosis
from gpudiag.rundir import load_run
from gpudiag.rundir.records import RUNNING_MEAN
from gpudiag.tbplugin import compare, views

SAMPLE = REPO / "sample_runs"


def test_a_devices_busy_share_is_its_step_bars_busy_parts() -> None:
    """The sample run's /host:CPU row: 30 % of its bar is the host's own work (Python
    between the steps, dispatch), so its lane is used at that share, not idle at 0 %."""
    (run_dir,) = (SAMPLE / "run").iterdir()
    run = load_run(run_dir)
    lanes = {lane["name"]: lane for lane in views.devices(run)["lanes"]}
    bars = {b["device"]: b for b in (views.bottleneck(run) or {})["bars"]}
    assert set(bars) <= set(lanes)
    for device, bar in bars.items():
        lane = lanes[device]
        busy = sum(bar["parts_ms"][p] for p in lane["busy_parts"]) / bar["step_ms"]
        assert lane["busy_share"] == pytest.approx(busy), device
    host = lanes["/host:CPU"]
    assert host["busy_parts"] == ["compute", "communication", "copy", "host"]
    assert host["busy_share"] > 0.25 and host["state"] == "used", host
    assert lanes["/device:CPU:0"]["busy_parts"] == ["compute", "communication", "copy"]


def test_the_numbers_the_tab_prints_are_written_by_the_one_rule() -> None:
    """Each step, part and share the page prints is carried in the JSON as the terminal
    writes it (gpudiag.layout.units), not formatted again by the page (its fix line, the
    terminal's with its prediction: tests/browser/test_tbplugin_browser.py)."""
    (run_dir,) = (SAMPLE / "run").iterdir()
    run = load_run(run_dir)
    neck = views.bottleneck(run) or {}
    assert neck["step_text"] == duration(neck["step_ms"] / 1000)
    for bar in neck["bars"]:
        assert bar["step_text"] == duration(bar["step_ms"] / 1000)
        assert bar["parts_text"] == {k: duration(v / 1000) for k, v in bar["parts_ms"].items()}
    for lane in views.devices(run)["lanes"]:
        assert lane["busy_text"] == (None if lane["busy_share"] is None
                                     else share(lane["busy_share"]))


def _two_runs(tmp_path: Path) -> tuple[Path, Path]:
    """The sample run twice in one logdir, the second started five minutes later."""
    (sample,) = (SAMPLE / "run").iterdir()
    older, newer = tmp_path / "runs" / "older", tmp_path / "runs" / "newer"
    for where, started in ((older, "2026-11-26T01:21:25+00:00"),
                           (newer, "2026-11-26T01:26:25+00:00")):
        shutil.copytree(sample, where)
        report = json.loads((where / "report.json").read_text())
        report["started_at"] = started
        (where / "report.json").write_text(json.dumps(report))
    return older, newer


def test_side_by_side_runs_older_to_newer_whichever_was_chosen_first(tmp_path: Path) -> None:
    older, newer = _two_runs(tmp_path)
    logdir = tmp_path / "runs"
    for first, second in ((newer, older), (older, newer)):
        view = compare.diff_view(load_run(first), load_run(second), logdir)
        assert (view["a"], view["b"]) == ("older", "newer"), view


def _bottleneck_diff(low: float | None, high: float | None = 0.0072) -> BottleneckDiff:
    return BottleneckDiff(
        finding_a="run.bottleneck", finding_b="run.bottleneck", before="input-bound",
        after=None, outcome="fixed", step_a_s=0.2233, step_b_s=0.0059,
        predicted_step_s=0.0059, measured_step_s=0.00411, error=0.00411 / 0.0059 - 1,
        predicted_low_s=low, predicted_high_s=None if low is None else high,
        inside=None if low is None or high is None else low <= 0.00411 <= high)


def test_side_by_side_says_whether_the_prediction_held() -> None:
    """In the answer's words and on the row of the median step predicted for B, never a
    prediction beside the profiled window's step with no word on it."""
    loop = LoopDiff("Model.fit", "Model.fit", Median(0.2233, 0.22, 0.23, 90),
                    Median(0.00411, 0.0040, 0.0042, 90), 0.0184, 0.018, 0.019, "faster")
    for (low, high), said, word in (
            ((0.0038, 0.0072), "the prediction held: B's median step 4.11 ms is inside the "
                               "predicted 3.80-7.20 ms (predicted 5.90)", "held"),
            ((0.0050, 0.0072), "the prediction did not hold: B's median step 4.11 ms is "
                               "under the predicted 5.00-7.20 ms (better than predicted "
                               "5.90)", "did not hold"),
            ((0.0030, 0.0040), "the prediction did not hold: B's median step 4.11 ms is "
                               "over the predicted 3.00-4.00 ms (worse than predicted "
                               "5.90)", "did not hold"),
            ((None, None), "the prediction cannot be held to: B's median step 4.11 ms, "
                           "predicted 5.90 ms with no interval", "no interval to hold B to")):
        record = DiffRecord("a", "b", "run", "run", loops=[loop],
                            bottlenecks=[_bottleneck_diff(low, high)])
        lines = compare.result(record)
        assert lines[0].startswith("B is 54.35x faster") and lines[1] == said, lines
        rows = {r["what"]: r for r in compare.rows(record)}
        assert rows["run.bottleneck: median step, predicted for B"]["change"] == word
        assert rows["run.bottleneck: the profiled window's step"]["change"] == ""


def test_the_loss_curve_marks_the_epochs_and_says_it_is_their_running_mean(
        tmp_path: Path) -> None:
    """The tab's curve and the notebook's carry the steps where an epoch began and the
    words that each point is Keras's running mean of its epoch so far, from the run's
    learning record; a record without them (a report written before) gets neither."""
    (sample,) = (SAMPLE / "run").iterdir()
    before = views.learning(load_run(sample)) or {}
    assert [(c["epochs"], c["loss_is"]) for c in before["curves"]] == [([], None)]
    run_dir = tmp_path / "run"
    shutil.copytree(sample, run_dir)
    report = json.loads((run_dir / "report.json").read_text())
    (learning,) = [f for f in report["findings"] if f["id"] == "run.learning"]
    learning["evidence"]["loops"][0].update(running_mean=True, epoch_starts=[40, 80])
    (run_dir / "report.json").write_text(json.dumps(report))
    run = load_run(run_dir)
    (curve,) = (views.learning(run) or {})["curves"]
    assert curve["name"] == "Model.fit" and curve["epochs"] == [40, 80]
    assert curve["loss_is"] == RUNNING_MEAN and "running mean of its epoch" in RUNNING_MEAN
    shown = Diagnosis(run)
    assert RUNNING_MEAN in shown.text()
    page = shown._repr_html_()
    assert "epoch begins at step 40" in page and "epoch begins at step 80" in page
    assert html.escape(RUNNING_MEAN) in page
