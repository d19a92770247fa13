"""Faults done for real to real processes: signals to gpudiag mid-child and a full disk.

Whatever way gpudiag ends, no process it started may outlive it by more than a few
seconds, and report.json stays strict JSON, marked for what happened. docs/reliability.md
counts these cases; keep the count true when adding one.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import jsonschema
import pytest
from helpers import REPO, findings_by_id, process_alive, run_dirs

SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())
GONE_WITHIN_S = 12.0  # the reaper's grace (3 s) plus a loaded 2-core machine's slack


def _start(*args: str, new_session: bool = False) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpudiag", *args], env={**os.environ, "PYTHONPATH": str(REPO)},
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
        text=True, start_new_session=new_session)


def _wait_for(predicate: object, what: str, proc: subprocess.Popen[str],
              timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():  # type: ignore[operator]
        if proc.poll() is not None:
            _, err = proc.communicate()
            pytest.fail(f"gpudiag ended before {what}: {err[-2000:]}")
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(process_alive(p) for p in pids):
        left = [p for p in pids if process_alive(p)]
        if time.monotonic() > deadline:
            for p in left:
                os.kill(p, signal.SIGKILL)
            pytest.fail(f"processes {left} outlived gpudiag by {GONE_WITHIN_S} s")
        time.sleep(0.05)


def _strict_report(run_dir: Path) -> dict:
    def reject(constant: str) -> None:
        raise ValueError(f"not strict JSON: {constant}")

    report: dict = json.loads((run_dir / "report.json").read_text(), parse_constant=reject)
    jsonschema.validate(report, SCHEMA)
    assert not list(run_dir.glob("*.tmp"))
    return report


def _pids_of(marker: Path) -> list[int]:
    return [int(x) for x in marker.read_text().split()] if marker.exists() else []


def _monitor_with_grandchildren(tmp_path: Path, *extra: str,
                                new_session: bool = False) -> tuple[subprocess.Popen[str],
                                                                     list[int]]:
    """gpudiag monitor running a shell whose two background sleeps are its grandchildren."""
    marker = tmp_path / "pids"
    script = (f"sleep 300 & echo $! >> {marker}; sleep 300 & echo $! >> {marker}; "
              f"echo $$ >> {marker}; wait")
    proc = _start("monitor", "--logdir", str(tmp_path / "runs"), *extra, "--",
                  "sh", "-c", script, new_session=new_session)
    _wait_for(lambda: len(_pids_of(marker)) == 3, "the command and its grandchildren", proc)
    return proc, _pids_of(marker)


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_signal_to_gpudiag_ends_the_command_and_its_grandchildren(
        tmp_path: Path, sig: signal.Signals) -> None:
    proc, pids = _monitor_with_grandchildren(tmp_path, "--json")
    proc.send_signal(sig)  # to gpudiag alone, as `kill PID`, `timeout` or systemd would
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    _assert_all_gone(pids)
    (run_dir,) = run_dirs(tmp_path / "runs")
    report = _strict_report(run_dir)
    assert report["interrupted"] is True and report["partial"] is True
    assert report["finished_at"] is not None
    assert report["data"]["interrupted_by"] == sig.name
    assert findings_by_id(report)["monitor.command"]["status"] == "warn"
    assert f"interrupted by {sig.name}" in err
    printed = json.loads(out)  # --json still prints the partial report
    assert printed["interrupted"] is True and printed["run_dir"] == report["run_dir"]


@pytest.mark.slow
def test_sigterm_to_gpudiags_process_group(tmp_path: Path) -> None:
    proc, pids = _monitor_with_grandchildren(tmp_path, new_session=True)
    os.killpg(proc.pid, signal.SIGTERM)  # a CI cancel: the whole group of gpudiag
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err
    _assert_all_gone(pids)
    assert _strict_report(run_dirs(tmp_path / "runs")[0])["interrupted"] is True


@pytest.mark.slow
def test_kill_9_of_gpudiag_still_ends_everything_it_started(tmp_path: Path) -> None:
    proc, pids = _monitor_with_grandchildren(tmp_path)
    proc.kill()
    proc.communicate(timeout=60)
    _assert_all_gone(pids)  # the watchdog saw gpudiag's pipe close
    report = _strict_report(run_dirs(tmp_path / "runs")[0])
    assert report["partial"] is True  # nothing of gpudiag could run: still readable


def _probe_child_pids(run_dir_glob: Path) -> list[int]:
    """Pids of gpudiag.child processes whose command line names this test's logdir."""
    out = []
    for stat in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            cmd = stat.read_bytes().split(b"\0")
        except OSError:
            continue
        if b"gpudiag.procs.child" in cmd and any(str(run_dir_glob).encode() in c for c in cmd):
            out.append(int(stat.parent.name))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_mid_probe_ends_the_tensorflow_child(tmp_path: Path,
                                                   sig: signal.Signals) -> None:
    logdir = tmp_path / "runs"
    proc = _start("placement", "--logdir", str(logdir))
    _wait_for(lambda: bool(_probe_child_pids(logdir)), "the probe's child", proc)
    children = _probe_child_pids(logdir)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    _assert_all_gone(children)
    report = _strict_report(run_dirs(logdir)[0])
    assert report["partial"] is True
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert report["interrupted"] is True and report["data"]["interrupted_by"] == "SIGTERM"
    else:
        assert proc.returncode == -signal.SIGKILL


# --------------------------------------------------------------------------- full disk


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 256 KiB tmpfs, where the platform lets this test mount one."""
    mount = tmp_path / f"tmpfs-{uuid.uuid4().hex[:6]}"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command here: cannot make a small filesystem to fill")
    made = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount)],
                          capture_output=True, text=True)
    if made.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({made.stderr.strip() or 'not permitted'})")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)


def _fill(path: Path) -> None:
    try:
        with (path / "filler").open("wb") as handle:
            while True:
                handle.write(b"\0" * 4096)
                handle.flush()
    except OSError as exc:
        assert exc.errno == 28, exc  # full, as intended


@pytest.mark.slow
def test_full_disk_from_the_start_is_one_line_exit_3(small_fs: Path) -> None:
    logdir = small_fs / "runs"
    logdir.mkdir()
    _fill(small_fs)
    proc = _start("monitor", "--logdir", str(logdir), "--", "true")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    (line,) = err.strip().splitlines()
    assert line.startswith("gpudiag: error: cannot write ") and "errno 28, ENOSPC" in line
    assert str(logdir) in line
    assert not list(logdir.rglob("*.tmp"))


@pytest.mark.slow
def test_disk_full_while_the_command_runs_keeps_its_exit_code(small_fs: Path) -> None:
    logdir = small_fs / "runs"
    filler = small_fs / "filler"
    proc = _start("monitor", "--logdir", str(logdir), "--", "sh", "-c",
                  f"cat /dev/zero > {filler} 2>/dev/null; exit 7")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 7, err  # the command's own code, not gpudiag's trouble
    lines = [ln for ln in err.splitlines() if ln.startswith("gpudiag: error:")]
    assert len(lines) == 1 and "errno 28, ENOSPC" in lines[0], err
    assert "Traceback" not in err
    (run_dir,) = run_dirs(logdir)
    assert not list(run_dir.rglob("*.tmp"))
    filler.unlink()
    _strict_report(run_dir)  # the last version that could be written, whole


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_signal_to_gpudiag_run_ends_the_users_program(tmp_path: Path,
                                                      sig: signal.Signals) -> None:
    marker = tmp_path / "pids"
    program = (f"import os, subprocess, time\n"
               f"child = subprocess.Popen(['sleep', '300'])\n"
               f"open({str(marker)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
               f"time.sleep(300)\n")
    proc = _start("run", "--logdir", str(tmp_path / "runs"), "--", sys.executable, "-c",
                  program)
    _wait_for(lambda: len(_pids_of(marker)) == 2, "the program and its child", proc)
    pids = _pids_of(marker)
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=60)
    _assert_all_gone(pids)
    report = _strict_report(run_dirs(tmp_path / "runs")[0])
    assert report["partial"] is True
    if sig == signal.SIGTERM:
        assert proc.returncode == 128 + signal.SIGTERM, err
        assert report["interrupted"] is True and report["data"]["interrupted_by"] == "SIGTERM"
        assert findings_by_id(report)["run.command"]["status"] == "warn"
