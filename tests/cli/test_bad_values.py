"""Values that pass a type check but would hang, overflow or poison report.json: each is
one line, exit 2, nothing written (docs/reliability.md counts them)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from helpers import assert_usage_error, gpudiag

LONG_NAME = "a" * 300
LONG_PATH = "/".join(["b" * 200] * 25)


@pytest.mark.parametrize(("args", "needle"), [
    (["scaling", "--allreduce-min-mb", "1e-9"], "--allreduce-min-mb"),
    (["scaling", "--allreduce-max-mb", "inf"], "--allreduce-max-mb"),
    (["scaling", "--allreduce-max-mb", "nan"], "--allreduce-max-mb"),
    (["scaling", "--learning-rate", "inf"], "--learning-rate"),
    (["scaling", "--learning-rate", "nan"], "--learning-rate"),
    (["scaling", "--timeout", "inf"], "--timeout"),
    (["monitor", "--interval", "inf", "--", "true"], "--interval"),
    (["monitor", "--interval", "1e400", "--", "true"], "--interval"),
    (["monitor", "--idle-threshold", "nan", "--", "true"], "--idle-threshold"),
    (["memory", "--fraction", "nan"], "--fraction"),
])
def test_non_finite_and_unbounded_values_are_refused(logdir: Path, args: list[str],
                                                     needle: str) -> None:
    assert_usage_error(gpudiag(*args, "--logdir", str(logdir)), needle, logdir)


@pytest.mark.parametrize(("logdir_arg", "needle"), [
    ("", "--logdir"),
    ("   ", "--logdir"),
    (LONG_NAME, "longer than the 255 bytes"),
    (LONG_PATH, "--logdir is too long"),
])
def test_logdirs_the_os_cannot_take_are_refused_before_anything_is_made(
        tmp_path: Path, logdir_arg: str, needle: str) -> None:
    proc = gpudiag("env", "--logdir", logdir_arg, cwd=tmp_path)
    assert_usage_error(proc, needle)
    assert list(tmp_path.iterdir()) == []  # not even the first component


def test_no_arguments_prints_the_help_and_no_empty_error() -> None:
    proc = gpudiag()
    assert "Usage: gpudiag" in proc.stdout + proc.stderr
    assert "error" not in proc.stderr
    assert proc.returncode == 2


@pytest.mark.parametrize(("host", "needle"), [
    ("", "--host is empty"),
    ("no-such-host.invalid", "--host no-such-host.invalid"),
])
def test_tensorboard_bad_host_is_exit_2(tmp_path: Path, host: str, needle: str) -> None:
    assert_usage_error(gpudiag("tensorboard", str(tmp_path), "--host", host), needle)


def test_tensorboard_port_in_use_is_exit_2(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = gpudiag("tensorboard", str(tmp_path), "--port", str(port))
    assert_usage_error(proc, f"--port {port} on localhost is already in use")


def test_a_script_without_a_shebang_is_refused_before_a_run_directory(
        logdir: Path, tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text("echo hi\n")
    script.chmod(0o755)
    assert_usage_error(gpudiag("monitor", "--logdir", str(logdir), "--", str(script)),
                       "has no #! line", logdir)
