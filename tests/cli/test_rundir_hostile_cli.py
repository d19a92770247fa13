"""One bad file never blinds or hangs a reader of run directories (issue 36, items 2-5).

On real files: report.json malformed inside (a finding that is a string, deep nesting,
a data section that is a list, NaN in evidence, schema_version true/-7/0), a FIFO where
report.json or a child's config.json belongs (never opened: a reader that opened it would
block for ever), symlinks out of the run directory and symlink loops, a 2 GB sparse
report.json (refused by its size). load_run says each in one RunDirError naming the field;
scan_runs lists the good runs and each bad one with why; `gpudiag diff` and `gpudiag
tensorboard --check` say one line and exit 2 before writing anything. The diff's verdict
says A and B being one directory, a run still running, and step times dropped as
impossible (negative, not finite, 1e308). docs/reliability.md counts these cases.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, assert_usage_error, gpudiag

from gpudiag import layout

SAMPLE_RUN = next((REPO / "sample_runs" / "run").iterdir())


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    file = run_dir / layout.REPORT_JSON
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data))  # allow_nan: Python writes NaN where it is told to
    return run_dir


def _set_data(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["data"].__setitem__(key, value)


def _set_evidence(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["findings"][0]["evidence"].__setitem__(key, value)


def _set_top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


# ---------------------------------------------------------------- diff and --check
DIFF_CASES = [
    ("findings-a-string", _set_top("findings", ["x"]), "findings[0] is str"),
    ("data-run-a-list", _set_data("run", [1]), "data.run is list"),
    ("schema-version-true", _set_top("schema_version", True), "schema_version is True"),
    ("nan-in-evidence", _set_evidence("x", math.nan), "is nan"),
    ("no-command", lambda d: d.pop("command"), "not a gpudiag report"),
    ("parts-a-string", lambda d: d["findings"].append(
        {"id": "run.bottleneck", "status": "warn", "message": "m", "advice": "",
         "evidence": {"parts_s": {"/gpu:0": {"period_s": "long"}}}}),
     "parts_s./gpu:0.period_s is not a number"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("change", "said"), [(c, s) for _, c, s in DIFF_CASES],
                         ids=[i for i, _, _ in DIFF_CASES])
def test_diff_of_a_malformed_run_is_one_line_before_its_run_directory(
        tmp_path: Path, change: Callable[[dict[str, Any]], None], said: str) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    bad = _edit(_copy(SAMPLE_RUN, tmp_path / "bad"), change)
    out = tmp_path / "out"
    assert_usage_error(gpudiag("diff", str(good), str(bad), "--logdir", str(out),
                               timeout=120), said, out)


@pytest.mark.slow
def test_diff_of_a_fifo_a_nul_and_a_300_character_name_is_one_line(tmp_path: Path) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    fifo = _copy(SAMPLE_RUN, tmp_path / "fifo")
    (fifo / layout.REPORT_JSON).unlink()
    os.mkfifo(fifo / layout.REPORT_JSON)
    out = tmp_path / "out"
    assert_usage_error(gpudiag("diff", str(good), str(fifo), "--logdir", str(out),
                               timeout=60), "is a FIFO", out)
    assert_usage_error(gpudiag("diff", str(good), "y" * 300, "--logdir", str(out),
                               timeout=60), "not a gpudiag run directory", out)


@pytest.mark.slow
def test_diff_of_a_run_with_itself_says_so(tmp_path: Path) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    out = tmp_path / "out"
    proc = gpudiag("diff", str(good), str(good) + "/.", "--logdir", str(out), "--json",
                   timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    caveat = next(f for f in json.loads(proc.stdout)["findings"] if f["id"] == "diff.caveats")
    assert caveat["status"] == "warn" and "A and B are one directory" in caveat["message"]


@pytest.mark.slow
def test_tensorboard_check_of_a_logdir_with_a_bad_run_is_one_line(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    _copy(SAMPLE_RUN, logdir / "good")
    _edit(_copy(SAMPLE_RUN, logdir / "bad"), _set_top("findings", ["x"]))
    assert_usage_error(gpudiag("tensorboard", str(logdir), "--check", "--port", "0",
                               timeout=60), "findings[0] is str")
