"""`gpudiag run` on programs whose loss does not fit their labels or their last layer, written
the way users write them (issue 46): the real CLI, a real child process, each program once.
run.loss-setup must name the cause at the program's compile(...) line with the fix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


def line_of(program: Path, text: str) -> int:
    return next(i for i, line in enumerate(program.read_text().splitlines(), 1)
                if text in line)


def run(program: Path, tmp_path: Path) -> tuple[int, dict[str, dict[str, Any]], str]:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(program), timeout=300)
    (run_dir,) = run_dirs(logdir)
    return proc.returncode, findings_by_id(load_report(run_dir)), proc.stdout + proc.stderr


def test_one_sigmoid_unit_on_digit_labels_is_named_at_compile(tmp_path: Path) -> None:
    program = PROGRAMS / "binary_loss_ten_labels.py"
    at = f"{program.name}:{line_of(program, 'model.compile(')}"
    code, found, said = run(program, tmp_path)
    f = found["run.loss-setup"]
    assert f["status"] == "fail", f["message"]
    assert "binary cross-entropy (binary_crossentropy) on labels 0-9 (10 distinct values)" \
        in f["message"] and f"(at {at})" in f["message"]
    assert "the loss went below 0" in f["message"]  # observed: it fell below 0
    assert f["actions"][0]["where"] == at
    assert "Dense(10, activation='softmax')" in f["actions"][0]["what"]
    # the verdict's learning line names the cause, not only "not falling"
    assert f"learning: FAIL binary cross-entropy on labels 0-9 at {at}" in " ".join(
        said.split())  # the verdict wraps its lines
    assert code == 0  # the program's own exit code, forwarded


def test_class_indices_into_categorical_crossentropy_are_named_beside_the_crash(
        tmp_path: Path) -> None:
    program = PROGRAMS / "sparse_labels_categorical_loss.py"
    at = f"{program.name}:{line_of(program, 'model.compile(')}"
    _, found, _ = run(program, tmp_path)
    f = found["run.loss-setup"]
    assert f["status"] == "fail" and found["run.crash"]["status"] == "fail"
    assert "categorical cross-entropy (categorical_crossentropy) on class indices (labels " \
        "of shape (400,), 0-9" in f["message"] and f["actions"][0]["where"] == at
    assert "sparse_categorical_crossentropy" in f["actions"][0]["what"]


def test_a_softmax_with_from_logits_true_is_named_at_compile(tmp_path: Path) -> None:
    program = PROGRAMS / "softmax_from_logits.py"
    at = f"{program.name}:{line_of(program, 'model.compile(')}"
    code, found, _ = run(program, tmp_path)
    f = found["run.loss-setup"]
    assert f["status"] == "warn", f["message"]
    assert f["title"] == f"softmax outputs with from_logits=True at {at}"
    assert "drop the last activation (Dense(10) alone)" in f["actions"][0]["what"]
    assert code == 0
