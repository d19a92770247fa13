"""`gpudiag run` on a long job: what a hung, stalled or long-running program leaves, and
what gpudiag shows while it runs. Real TensorFlow in real child processes, real signals."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, TESTS_DIR, findings_by_id, run_dirs

from gpudiag import layout
from gpudiag.run import events

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


def start_run(logdir: Path, *command: str, options: tuple[str, ...] = ()
              ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [PY, "-m", "gpudiag", "run", "--logdir", str(logdir), *options, "--", *command],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)


def wait_for_line(proc: subprocess.Popen[str], needle: str) -> str:
    assert proc.stdout is not None
    for line in proc.stdout:
        if needle in line:
            return line
    raise AssertionError(f"gpudiag ended without printing {needle!r}")


def until(condition, what: str, deadline_s: float = 20.0):  # type: ignore[no-untyped-def]
    """Poll a file-backed condition (no fixed sleep); fail after ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline_s} s: {what}")


def program_dir(logdir: Path) -> Path:
    (run_dir,) = run_dirs(logdir)
    return run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME


def step_rows(events_dir: Path) -> int:
    by_pid, _ = events.read_events(events_dir)
    return sum(len(e.get("rows") or []) for evs in by_pid.values() for e in evs
               if e["kind"] == "function_steps")


def test_a_hung_program_killed_with_sigkill_keeps_every_step_it_ran(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = start_run(logdir, PY, str(PROGRAMS / "hangs_after_steps.py"), "31")
    try:
        wait_for_line(proc, "hanging after 31 steps")
        out = program_dir(logdir)
        # no further step comes: the rows buffered after the first 10 are written anyway
        until(lambda: step_rows(out) == 31, "31 step rows written while the program hangs",
              deadline_s=10)
        (events_file,) = out.glob(f"{layout.RUN_EVENTS_PREFIX}*")
        pid = int(events_file.name[len(layout.RUN_EVENTS_PREFIX):].split(".")[0])
        os.kill(pid, signal.SIGKILL)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 137
    report = json.loads((out.parent.parent / layout.REPORT_JSON).read_text())
    assert "was killed by SIGKILL" in findings_by_id(report)["run.command"]["message"]
    (obs,), _ = events.observe_all(out)
    (series,) = obs.series
    assert len(series.steps) == 31
