"""`gpudiag run -- python trian.py`: a Python command whose script does not exist is one line
and exit 2 before anything starts (no run directory); every other way of starting Python
(a module, -c, options before the script, a script relative to the working directory) and
a command that is not Python still run. Real child processes."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import assert_usage_error, gpudiag, run_dirs

from gpudiag.procs.command import python_script

PY = sys.executable


def test_a_typo_in_the_scripts_name_is_one_line_and_exit_2_with_no_run_directory(
        tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('trained')\n")
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, "trian.py", cwd=tmp_path)
    assert_usage_error(proc, "no such script: trian.py", logdir)
    assert str(tmp_path) in proc.stderr  # where it looked
    assert proc.stdout == ""


def test_options_before_a_missing_script_are_skipped_to_find_it(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, "-u", "-W", "ignore",
                   "-X", "dev", "trian.py", "--epochs", "3", cwd=tmp_path)
    assert_usage_error(proc, "no such script: trian.py", logdir)


@pytest.mark.parametrize("command", [
    ("-u", "train.py"),                # options before the script, relative to cwd
    ("-Wignore", "-B", "train.py"),
    ("-c", "print('trained')"),        # -c: no script
    ("-uc", "print('trained')"),
    ("-m", "train"),                   # a module found from cwd
])
def test_every_other_way_of_starting_python_still_runs(tmp_path: Path,
                                                       command: tuple[str, ...]) -> None:
    (tmp_path / "train.py").write_text("print('trained')\n")
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, *command, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trained" in proc.stdout
    assert len(run_dirs(logdir)) == 1


def test_a_command_that_is_not_python_runs_with_its_arguments_unchecked(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", "sh", "-c", "echo trian.py ran",
                   cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trian.py ran" in proc.stdout and len(run_dirs(logdir)) == 1


def test_the_script_is_read_from_pythons_own_command_line_grammar() -> None:
    assert python_script([PY, "-u", "train.py", "--lr", "0.1"]) == "train.py"
    assert python_script(["python3", "-W", "ignore", "-O", "t.py"]) == "t.py"
    assert python_script(["python3", "-Xdev", "t.py"]) == "t.py"
    assert python_script(["python3", "--check-hash-based-pycs", "never", "t.py"]) == "t.py"
    assert python_script(["python3", "--", "t.py"]) == "t.py"
    for no_script in (["python3"], ["python3", "-"], ["python3", "-m", "pkg"],
                      ["python3", "-c", "x"], ["python3", "-Bm", "pkg"],
                      ["python3", "--version"], ["sh", "train.py"]):
        assert python_script(no_script) is None, no_script
