"""`gpudiag run` never harms the program it watches (issue 20): real programs, real
processes, real signals, a real small filesystem. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO, findings_by_id, load_report, run_dirs

ENV = {**os.environ, "PYTHONPATH": str(REPO)}


def run_under(logdir: Path, program: str, *args: str, cwd: Path | None = None,
              timeout: float = 120, env: dict[str, str] | None = None,
              ) -> subprocess.CompletedProcess[bytes]:
    """``gpudiag run -- python -c PROGRAM ARGS`` with bytes captured."""
    return subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir), "--",
         sys.executable, "-c", program, *args],
        capture_output=True, timeout=timeout, env={**ENV, **(env or {})}, cwd=cwd or REPO,
        stdin=subprocess.DEVNULL)


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 2 MiB tmpfs, where the platform lets this test mount one."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: cannot make a small filesystem to fill "
                    "(tests/test_run_streams.py injects ENOSPC at the same write instead)")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip() or 'not permitted'}; "
                    "tests/test_run_streams.py injects ENOSPC at the same write instead)")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


FIVE_MB = ("import sys\n"
           "for i in range(50_000):\n"
           "    sys.stdout.write(f'{i:09d} ' + 'y' * 89 + '\\n')\n"
           "sys.stdout.flush()\n"
           "print('finished', file=sys.stderr)\n")


@pytest.mark.slow
def test_a_full_disk_stops_the_saving_not_the_program(small_fs: Path) -> None:
    logdir = small_fs / "runs"
    done = run_under(logdir, FIVE_MB)
    expected = b"".join(f"{i:09d} ".encode() + b"y" * 89 + b"\n" for i in range(50_000))
    err = done.stderr.decode()
    assert expected in done.stdout, err[-2000:]  # all 5 MB reached the terminal, in order
    assert "finished" in err  # the program ran to its end
    assert b"Traceback" not in done.stderr + done.stdout
    assert done.returncode == 3, err[-2000:]
    (run_dir,) = run_dirs(logdir)
    said = [ln for ln in err.splitlines() if ln.startswith("gpudiag: ")]
    assert any(str(run_dir / "children" / "program" / "stdout.txt") in ln
               and "errno 28, ENOSPC" in ln for ln in said), said
    assert not list(logdir.rglob("*.tmp"))


@pytest.mark.slow
def test_a_program_that_changes_directory_keeps_its_trace_and_crash_stack_in_the_run(
        tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", "runs", "--", sys.executable,
         str(REPO / "tests" / "programs" / "moves_cwd.py"), str(elsewhere)],
        capture_output=True, text=True, timeout=300, env=ENV, cwd=tmp_path,
        stdin=subprocess.DEVNULL)
    assert done.returncode == 128 + 11, done.stderr[-3000:]
    assert "30 steps in" in done.stdout
    assert list(elsewhere.iterdir()) == []  # nothing of gpudiag's under the new directory
    (run_dir,) = run_dirs(tmp_path / "runs")
    assert list(run_dir.rglob("*.xplane.pb")), "the profiled window's trace is in the run"
    found = findings_by_id(load_report(run_dir))
    assert found["run.profile"]["status"] == "ok", found["run.profile"]
    crash = found["run.crash"]
    assert crash["status"] == "fail" and "Segmentation fault" in crash["message"], crash
    assert "crash_in_user_code" in str(crash["evidence"]), crash["evidence"]
