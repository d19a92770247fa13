"""`gpudiag tensorboard`: the newest run directory by default, a quiet start on localhost
with the URL printed, Ctrl-C stops it; bad logdirs are exit 2; `--check` fails (exit 1)
when a dashboard lacks what the run directories promise. (The sample runs' dashboards:
tests/browser/test_tensorboard_views.py.)"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from helpers import REPO, assert_usage_error, gpudiag

from gpudiag import layout
from gpudiag.report import Finding
from gpudiag.session import RunSession
from gpudiag.tb import check as tbcheck

URL_LINE = re.compile(
    r"^TensorBoard on (\S+): (http://localhost:\d+)/#gpudiag \(Ctrl-C stops it\)$")


@pytest.mark.slow
def test_newest_run_directory_served_quietly_and_stopped_by_ctrl_c(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    with RunSession("env", runs) as old:
        old.add(Finding("env.nvml", "skip", "no NVML here"))
    with RunSession("placement", runs) as new:
        new.add(Finding("placement.log", "ok", "every op placed"))
    with RunSession("run", runs) as typo:  # newer, and failed before its program started
        typo.set("run", {"returncode": 2, "tensorflow_processes": []})
    assert layout.newest_run_dir(runs) == typo.run_dir != new.run_dir != old.run_dir
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "tensorboard", "--port", "0"], cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )
    try:
        assert proc.stdout is not None and proc.stderr is not None
        line = proc.stdout.readline().rstrip("\n")  # blocks until the URL (or an exit)
        m = URL_LINE.match(line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        assert m.group(1) == f"runs/{new.run_dir.name}"
        url = m.group(2)
        with urllib.request.urlopen(f"{url}/data/plugin/text/tags", timeout=30) as resp:
            tags = json.load(resp)
        assert {run: sorted(t) for run, t in tags.items()} == \
            {layout.REPORT_TB_RUN: sorted([layout.TAG_VERDICT, layout.TAG_FINDINGS,
                                           layout.TAG_REPORT])}
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
    assert proc.returncode == 0
    assert out.strip() == "TensorBoard stopped"
    assert err == ""  # quiet: none of TensorFlow's or TensorBoard's own lines
    with pytest.raises(OSError):  # the server went with it
        urllib.request.urlopen(f"{url}/data/plugin/text/tags", timeout=5)


def test_bad_logdirs_are_one_line_and_exit_2(tmp_path: Path) -> None:
    assert_usage_error(gpudiag("tensorboard", str(tmp_path / "nothing"), timeout=60),
                       "does not exist")
    (tmp_path / "empty" / "sub").mkdir(parents=True)
    assert_usage_error(gpudiag("tensorboard", str(tmp_path / "empty"), timeout=60),
                       "has no TensorBoard event files")
    (tmp_path / "file").write_text("x")
    assert_usage_error(gpudiag("tensorboard", str(tmp_path / "file"), timeout=60),
                       "is not a directory")
    # no argument and no runs/ here: runs/ is the default, and it is missing
    assert_usage_error(gpudiag("tensorboard", "--port", "0", cwd=tmp_path, timeout=60),
                       "logdir runs does not exist")


@pytest.mark.slow
def test_check_fails_when_a_promised_run_is_missing(tmp_path: Path) -> None:
    """A scaling report that names a configuration whose TensorBoard run is not there:
    --check says which dashboards lack it and exits 1 (without waiting its full timeout)."""
    with RunSession("scaling", tmp_path) as session:
        session.set("scaling", {"configs": {"towers-1dev": {"strategy": "towers",
                                                            "trace": {"reason": "none"}}}})
        session.text(layout.TAG_SCALING_TABLE, "| strategy |\n|---|\n| towers |")
    started = time.monotonic()
    proc = gpudiag("tensorboard", "--check", "--port", "0", str(tmp_path), timeout=300)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run = f"{session.run_dir.name}/towers-1dev"
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"TensorBoard on {tmp_path} (http://localhost:")
    by_plugin = {ln.split()[1].rstrip(":"): ln for ln in lines[1:]}
    assert by_plugin["scalars"].startswith("  FAIL scalars: 1 expected runs, missing: ")
    assert f"{run} ['by_config/examples_per_s', 'train/examples_per_s', 'train/loss']" \
        in by_plugin["scalars"]
    assert by_plugin["hparams"].startswith("  FAIL hparams:")
    assert layout.trial_name(session.run_dir.name, "towers-1dev") in by_plugin["hparams"]
    assert by_plugin["text"] == "  OK   text: 1 expected runs, all listed"
    assert time.monotonic() - started < 100
    assert proc.stderr == ""


def test_compare_names_what_is_missing() -> None:
    want = tbcheck.Expected()
    want.need("scalars", "a/towers-1dev", "train/loss", "by_config/examples_per_s")
    want.need("hparams", "towers-1dev a")
    want.categories.add("scaling")
    want.first_metric = "by_config/examples_per_s"  # a scaling run's experiment
    seen = tbcheck.Observed(
        runs={"scalars": {"a/towers-1dev": {"train/loss"}}, "histograms": {}, "text": {},
              "images": {}, "hparams": {"towers-1dev a": set()}, "custom_scalars": {},
              "profile": {}},
        active={"scalars", "hparams", "custom_scalars"}, categories={"scaling"},
        hparams_metrics=["by_config/examples_per_s", "by_config/speedup"])
    verdicts = {v.plugin: v for v in tbcheck.compare(want, seen)}
    assert not verdicts["scalars"].ok
    assert verdicts["scalars"].line == ("scalars: 1 expected runs, missing: a/towers-1dev "
                                        "['by_config/examples_per_s']")
    assert verdicts["hparams"].ok and verdicts["custom_scalars"].ok
    assert verdicts["text"].ok  # nothing expected
    worse = tbcheck.Observed(seen.runs, {"scalars"}, set(), ["by_config/speedup"])
    verdicts = {v.plugin: v for v in tbcheck.compare(want, worse)}
    assert verdicts["hparams"].line.startswith("hparams: 1 expected trials, missing: inactive")
    assert "first metric ['by_config/speedup']" in verdicts["hparams"].line
    assert verdicts["custom_scalars"].line == \
        "custom_scalars: 0 chart categories, missing: inactive; scaling"


def test_compare_wants_the_short_verdict_as_the_text_tabs_first_card() -> None:
    """The Text tab shows tags in order: a user's own text tag that sorts before the verdict,
    or a report run without it, makes its first card something else."""
    want = tbcheck.Expected()
    want.need("text", "a/report", layout.TAG_VERDICT, layout.TAG_FINDINGS)

    def seen(text: dict[str, set[str]]) -> tbcheck.Observed:
        return tbcheck.Observed(
            runs={"scalars": {}, "histograms": {}, "text": text, "images": {}, "hparams": {},
                  "custom_scalars": {}, "profile": {}},
            active={"text"}, categories=set(), hparams_metrics=[])

    good = {"a/report": {layout.TAG_VERDICT, layout.TAG_BOTTLENECK, layout.TAG_FINDINGS},
            "a/program-1": {layout.TAG_RUN_LIVE}}
    assert {v.plugin: v for v in tbcheck.compare(want, seen(good))}["text"].ok
    mine = {**good, "a/program-1": {"config/notes"}}  # the user's own text, sorting first
    line = {v.plugin: v for v in tbcheck.compare(want, seen(mine))}["text"].line
    assert line == ("text: 1 expected runs, missing: first card config/notes, not "
                    f"{layout.TAG_VERDICT}")
    old = {"a/report": {layout.TAG_BOTTLENECK, layout.TAG_FINDINGS}}  # written before it
    line = {v.plugin: v for v in tbcheck.compare(want, seen(old))}["text"].line
    assert line == ("text: 1 expected runs, missing: a/report ['findings/answer']; first "
                    f"card {layout.TAG_BOTTLENECK}, not {layout.TAG_VERDICT}")
