"""`gpudiag run` ends with the program's own exit code, whatever its findings; `--strict`
(gpudiag as a gate) makes a failed check exit 1 when the program exited 0. Real programs
under real `gpudiag run` processes (the case without --strict and a failed check:
tests/e2e/test_run_e2e.py's keras_run; a program's own non-zero code without --strict:
its non-Python command test)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, run_program

PROGRAM = str(TESTS_DIR / "programs" / "keras_exit_code.py")


@pytest.mark.slow
@pytest.mark.parametrize(("learning_rate", "code", "learning", "expected"), [
    ("0", "0", "fail", 1),  # cannot learn, exits 0: --strict gates on the failed check
    ("0", "3", "fail", 3),  # its own failure is what a scheduler must see
    ("0.1", "0", "ok", 0),  # learns, exits 0: nothing to gate
], ids=["stuck-exit0", "stuck-exit3", "learns-exit0"])
def test_strict_gates_only_a_program_that_succeeded(
        tmp_path: Path, learning_rate: str, code: str, learning: str, expected: int) -> None:
    r = run_program(tmp_path, sys.executable, PROGRAM, learning_rate, code,
                    options=("--strict", "--profile-steps", "0"))
    assert r.found["run.learning"]["status"] == learning, r.found["run.learning"]["message"]
    assert r.returncode == expected, r.stderr[-2000:]
    assert "final loss" in r.stdout
