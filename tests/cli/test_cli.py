"""The CLI's edges: --help without TensorFlow, bad input as one line and exit 2."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, assert_usage_error, gpudiag
from typer.testing import CliRunner

from gpudiag.cli import app, main

PARENT_MODULES = ("gpudiag.cli", "gpudiag.tb.writer", "gpudiag.layout", "gpudiag.procs.runner",
                  "gpudiag.records.training", "gpudiag.commands.scaling", "gpudiag.scaling.judge",
                  "gpudiag.scaling.tb_runs", "gpudiag.train.datafile", "gpudiag.tb.views",
                  "gpudiag.tb.serve", "gpudiag.tb.check", "gpudiag.commands.tensorboard",
                  "gpudiag.commands.memory", "gpudiag.commands.monitor", "gpudiag.session")


def test_parent_modules_import_no_tensorflow(tmp_path) -> None:
    """Imported, and writing the parent's TensorBoard summaries (HParams experiment and
    session, Custom Scalars layout), the parent's modules bring in no TensorFlow."""
    code = (f"import importlib, sys\nfor m in {PARENT_MODULES!r}:\n"
            "    importlib.import_module(m)\n"
            "    assert 'tensorflow' not in sys.modules, m\n"
            "from pathlib import Path\n"
            "from gpudiag.tb import views as tbviews\n"
            "from gpudiag.tb.writer import EventWriter, HParam\n"
            f"run = Path({str(tmp_path)!r})\n"
            "tbviews.write_charts(run, tbviews.scaling_charts(nvml=True))\n"
            "with EventWriter(run / 'towers-1dev') as w:\n"
            "    w.hparams_experiment([HParam('devices', True, True)], [('a/b', 'b')])\n"
            "    w.hparams_session('t', {'devices': 1}, ok=False)\n"
            "    w.scalar('a/b', 1.0, 1)\n"
            "assert 'tensorflow' not in sys.modules, 'writing imported tensorflow'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr


def test_help_imports_no_tensorflow() -> None:
    code = ("import sys\nfrom gpudiag.cli import main\n"
            "rc = main(['--help'])\n"
            "assert 'tensorflow' not in sys.modules, 'tensorflow imported'\n"
            "sys.exit(rc)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    for command in ("env", "placement", "tensorboard"):
        assert command in proc.stdout


def test_version_and_command_help_via_clirunner() -> None:
    from gpudiag import __version__

    version = CliRunner().invoke(app, ["--version"])
    assert version.exit_code == 0 and version.output.strip() == f"gpudiag {__version__}"
    result = CliRunner().invoke(app, ["placement", "--help"])
    assert result.exit_code == 0
    assert "--virtual-gpus" in result.output and "--timeout" in result.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["placement", "--timeout", "0"], "--timeout"),
        (["placement", "--timeout", "-3"], "--timeout"),
        (["placement", "--timeout", "abc"], "--timeout"),
        (["placement", "--virtual-gpus", "0"], "--virtual-gpus"),
        (["placement", "--virtual-gpus", "-1"], "--virtual-gpus"),
        (["placement", "--virtual-gpus", "100000"], "--virtual-gpus"),
        (["placement", "--no-such-option"], "--no-such-option"),
        (["env", "--timeout", "nan"], "--timeout"),
        (["no-such-command"], "no-such-command"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], needle: str, tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag(*args, "--logdir", str(logdir), timeout=60)
    assert_usage_error(proc, needle, logdir)


def test_logdir_that_is_a_file_is_refused_and_left_alone(tmp_path: Path) -> None:
    target = tmp_path / "notes.txt"
    target.write_text("my notes\n")
    proc = gpudiag("placement", "--logdir", str(target), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == f"gpudiag: error: --logdir {target} is a file, not a directory"
    assert target.read_text() == "my notes\n"


def test_logdir_under_a_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    assert main(["env", "--logdir", str(tmp_path / "f" / "runs")]) == 2


def test_unwritable_logdir_is_refused() -> None:
    proc = gpudiag("env", "--logdir", "/proc/gpudiag-test-runs", timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "--logdir /proc/gpudiag-test-runs" in proc.stderr


def test_tensorboard_on_missing_logdir_is_exit_2(tmp_path: Path) -> None:
    proc = gpudiag("tensorboard", str(tmp_path / "nothing"), timeout=60)
    assert proc.returncode == 2 and "does not exist" in proc.stderr


def test_worker_and_tensorboard_without_logdir_from_an_empty_directory(tmp_path: Path) -> None:
    """`worker` reads TF_CONFIG after the options: with none it is a one-line exit 2, not a
    traceback; `tensorboard` with no runs under the default logdir says so."""
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CONFIG", "SLURM_JOB_ID")}
    worker = subprocess.run([sys.executable, "-m", "gpudiag", "worker"], capture_output=True,
                            text=True, timeout=60, cwd=tmp_path, stdin=subprocess.DEVNULL,
                            env={**env, "PYTHONPATH": str(REPO)})
    assert_usage_error(worker, "TF_CONFIG is not set")
    board = gpudiag("tensorboard", cwd=tmp_path, timeout=60)
    assert board.returncode == 2 and "Traceback" not in board.stderr
    assert len(board.stderr.strip().splitlines()) == 1, board.stderr


HELP_COMMANDS = ("", "env", "placement", "memory", "scaling", "worker", "monitor", "run",
                 "explain", "diff", "try", "tensorboard")


@pytest.mark.parametrize("command", HELP_COMMANDS)
def test_help_reads_at_80_columns(command: str) -> None:
    """`gpudiag [COMMAND] --help` in an 80-column terminal: every line fits, the words have
    the room (help text from column 34 at the latest, not a squeezed column beside a type
    column), values named in words (no typer ``<bool>``, ``<int range>``), no space
    before a period or comma, no command's summary cut with '...'."""
    proc = subprocess.run([sys.executable, "-m", "gpudiag", *filter(None, [command]), "--help"],
                          capture_output=True, text=True, cwd=REPO, timeout=60,
                          env={**os.environ, "COLUMNS": "80", "TERM": "dumb",
                               "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert len(lines) > 5, proc.stdout
    for line in lines:
        assert len(line) <= 80, line
        assert "\u2502" not in line and "\u2026" not in line, line  # no panel, no ellipsis
        assert not re.search(r"<(?:bool|int|float|str|path|Path|list\[str\])(?: range)?>",
                             line), line
        assert not re.search(r"\w \.(?:\s|$)| ,", line), line
        if not line.startswith("Usage:"):
            assert not line.rstrip().endswith("..."), line
    indents = {len(ln) - len(ln.lstrip()) for ln in lines if ln.startswith(" " * 6)}
    assert all(i <= 34 for i in indents), sorted(indents)
