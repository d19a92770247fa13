"""The runner against real child processes that succeed, raise, crash and hang."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from helpers import TESTS_DIR

from gpudiag.procs.runner import run_child

PROBE = "fixture_probes.misbehave"


def _run(tmp_path: Path, behave: str, timeout_s: float = 60, **extra: object):
    env = {"PYTHONPATH": os.pathsep.join([str(TESTS_DIR), str(TESTS_DIR.parent)])}
    return run_child(PROBE, {"behave": behave, **extra}, run_dir=tmp_path, name=behave,
                     timeout_s=timeout_s, env=env)


def test_ok_child_returns_its_result_and_keeps_its_output(tmp_path: Path) -> None:
    child = _run(tmp_path, "ok", echo=[1, 2])
    assert child.ok and child.result == {"echo": [1, 2]}
    assert child.returncode == 0 and not child.timed_out
    assert "childprobe says hello" in child.stderr_text()
    assert json.loads((child.dir / "config.json").read_text()) == {"behave": "ok", "echo": [1, 2]}


def test_probe_exception_is_a_one_line_error_with_the_traceback_kept(tmp_path: Path) -> None:
    child = _run(tmp_path, "raise")
    assert not child.ok
    assert child.error_type == "ValueError"
    assert child.error == "the probe found nothing to probe"
    assert "Traceback" in child.stderr_text()
    assert child.returncode == 1


def test_crashing_child_is_reported_with_signal_and_stderr_tail(tmp_path: Path) -> None:
    child = _run(tmp_path, "abort")
    assert not child.ok and child.error_type == "Crash"
    assert child.returncode == -6
    assert "SIGABRT" in (child.error or "")
    assert any("childprobe says hello" in line for line in child.stderr_tail)


def test_child_exiting_without_result_is_a_crash(tmp_path: Path) -> None:
    child = _run(tmp_path, "exit")
    assert not child.ok and child.error_type == "Crash"
    assert "exited with code 7" in (child.error or "")


def test_hanging_child_is_killed_at_the_timeout(tmp_path: Path) -> None:
    start = time.monotonic()
    child = _run(tmp_path, "hang", timeout_s=2.0)
    elapsed = time.monotonic() - start
    assert child.timed_out and not child.ok and child.error_type == "Timeout"
    assert "within 2 s" in (child.error or "")
    assert elapsed < 15
    assert "hanging now" in child.stderr_text()
    ev = child.evidence()
    assert ev["timed_out"] is True and ev["stderr_file"].endswith("stderr.txt")
