"""Signals and process groups under `gpudiag run` as plainly (issue 26, cases 1, 2, 4, 11):
nohup outside and inside, a SIGTERM handler's grace, a second Ctrl-C, Ctrl-Z and fg, a
program that makes its own process group or session, `kill -9` of gpudiag then. Each
program runs plainly and under `gpudiag run` with the same signals; the exit code, stdout
and the file it writes are compared. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, ended, process_alive, until

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
GONE_WITHIN_S = 12.0  # the reaper's grace (3 s) plus a loaded 2-core machine's slack

#: Writes its pid, then waits for the file ``gate``; a SIGTERM its handler gets, or a
#: Ctrl-C, is written to ``signals``; once the gate opens it saves a "checkpoint".
GATED = """
import os, pathlib, signal, sys, time
where, mode = pathlib.Path(sys.argv[1]), sys.argv[2]
got = []
def on_term(signum, frame):
    got.append(signum)
    (where / 'signals').write_text(' '.join(map(str, got)))
if mode == 'term-handler':
    signal.signal(signal.SIGTERM, on_term)
if mode == 'ignore-term':
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
(where / 'pid').write_text(str(os.getpid()))
print('epoch 1', flush=True)
n = 0
try:
    while not (where / 'gate').exists():
        n += 1
        (where / 'count').write_text(str(n))
        time.sleep(0.01)
except KeyboardInterrupt:
    (where / 'signals').write_text('2')
    while not (where / 'gate').exists():
        time.sleep(0.01)
(where / 'checkpoint').write_bytes(bytes(range(256)) * 1000)
print('saved', got, flush=True)
"""

Act = Callable[[subprocess.Popen[bytes], Path], None]
Result = tuple[int, bytes, bytes]


def _under(logdir: Path, options: tuple[str, ...] = ()) -> list[str]:
    return [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir), *options, "--"]


def _run(argv: list[str], where: Path, act: Act) -> Result:
    """``argv`` started with its stderr in ``where/stderr``, ``act`` done to it, then
    awaited: (exit code, stdout, the checkpoint it saved)."""
    where.mkdir()
    with (where / "stderr").open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err,
                                stdin=subprocess.DEVNULL, env=ENV, cwd=REPO)
    with ended(proc):
        act(proc, where)
        out, _ = proc.communicate(timeout=120)
    ckpt = where / "checkpoint"
    return proc.returncode, out, ckpt.read_bytes() if ckpt.exists() else b""


def _both(tmp_path: Path, mode: str, act: Act, *, outside: tuple[str, ...] = (),
          inside: tuple[str, ...] = (), options: tuple[str, ...] = ()) -> tuple[Result, Result]:
    """GATED plainly (``outside + inside + python``) and under `gpudiag run`
    (``outside + gpudiag run + inside + python``), ``act`` done to each."""
    program = [*inside, sys.executable, "-c", GATED]
    plain = _run([*outside, *program, str(tmp_path / "plain"), mode], tmp_path / "plain", act)
    under = _run([*outside, *_under(tmp_path / "runs", options), *program,
                  str(tmp_path / "under"), mode], tmp_path / "under", act)
    return plain, under


def _pid(where: Path) -> int:
    return int(until(lambda: (where / "pid").exists() and (where / "pid").read_text(),
                     "the program's pid", 120))


def _said(where: Path, text: str) -> bool:
    return text in (where / "stderr").read_text(errors="replace")


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def _err(tmp_path: Path) -> str:
    return (tmp_path / "under" / "stderr").read_text(errors="replace")[-3000:]


def _nohup() -> str:
    nohup = shutil.which("nohup")
    if nohup is None:
        pytest.skip("no nohup command here")
    return nohup


@pytest.mark.slow
def test_nohup_around_gpudiag_keeps_the_job_running_after_a_hang_up(tmp_path: Path) -> None:
    """`nohup gpudiag run -- python train.py`, then the ssh logout's SIGHUP."""
    def hang_up(proc: subprocess.Popen[bytes], where: Path) -> None:
        _pid(where)
        proc.send_signal(signal.SIGHUP)
        (where / "gate").touch()

    plain, under = _both(tmp_path, "plain", hang_up, outside=(_nohup(),))
    assert plain[0] == 0 and plain[2]
    assert under == plain, _err(tmp_path)


@pytest.mark.slow
def test_nohup_inside_ignores_the_hang_up_gpudiag_passes_on(tmp_path: Path) -> None:
    """`gpudiag run -- nohup python train.py`: the SIGHUP is passed on, the program ignores
    it, and gpudiag goes on watching (it once SIGTERMed the program 5 s later)."""
    def hang_up(proc: subprocess.Popen[bytes], where: Path) -> None:
        _pid(where)
        proc.send_signal(signal.SIGHUP)
        if where.name == "under":
            until(lambda: _said(where, "SIGHUP passed on to the program"), "gpudiag's line")
        (where / "gate").touch()

    plain, under = _both(tmp_path, "plain", hang_up, inside=(_nohup(),))
    assert plain[0] == 0 and plain[2]
    assert under == plain, _err(tmp_path)


@pytest.mark.slow
def test_a_sigterm_handler_gets_its_grace_to_save_a_checkpoint(tmp_path: Path) -> None:
    """The program saves a checkpoint on SIGTERM, taking longer than the 8 s it once got."""
    def terminate(proc: subprocess.Popen[bytes], where: Path) -> None:
        pid = _pid(where)
        proc.send_signal(signal.SIGTERM)
        until(lambda: (where / "signals").exists(), "the program's handler")
        if where.name == "under":
            until(lambda: _said(where, "it has 30 s to end by itself (--grace)"), "the grace")
            time.sleep(9)  # the point: past where gpudiag once sent SIGTERM again, then KILL
            assert process_alive(pid) and (where / "signals").read_text() == "15"
        (where / "gate").touch()

    plain, under = _both(tmp_path, "term-handler", terminate)
    assert plain[0] == 0 and len(plain[2]) == 256_000
    assert under == plain, _err(tmp_path)


@pytest.mark.slow
def test_a_second_ctrl_c_ends_the_program_at_once(tmp_path: Path) -> None:
    where = tmp_path / "under"

    def interrupt_twice(proc: subprocess.Popen[bytes], where: Path) -> None:
        _pid(where)
        proc.send_signal(signal.SIGINT)
        until(lambda: (where / "signals").exists(), "the program's KeyboardInterrupt")
        until(lambda: _said(where, "Ctrl-C again ends it now"), "gpudiag's line")
        proc.send_signal(signal.SIGINT)

    start = time.monotonic()
    code, _, ckpt = _run([*_under(tmp_path / "runs", ("--grace", "600")), sys.executable,
                          "-c", GATED, str(where), "plain"], where, interrupt_twice)
    assert time.monotonic() - start < 120
    assert code == 128 + signal.SIGINT and not ckpt, _err(tmp_path)
    assert not process_alive(int((where / "pid").read_text()))
    assert "SIGKILL" in _err(tmp_path) and "Traceback" not in _err(tmp_path)


@pytest.mark.slow
def test_a_program_ignoring_sigterm_is_killed_after_its_grace(tmp_path: Path) -> None:
    where = tmp_path / "under"

    def terminate(proc: subprocess.Popen[bytes], where: Path) -> None:
        _pid(where)
        proc.send_signal(signal.SIGTERM)

    code, out, ckpt = _run([*_under(tmp_path / "runs", ("--grace", "1")), sys.executable,
                            "-c", GATED, str(where), "ignore-term"], where, terminate)
    assert code == 128 + signal.SIGTERM and out == b"epoch 1\n" and not ckpt, _err(tmp_path)
    assert "has 1 s to end by itself" in _err(tmp_path)
    assert "did not end within its grace: ended with SIGKILL" in _err(tmp_path)
    assert not process_alive(int((where / "pid").read_text()))


@pytest.mark.slow
def test_ctrl_z_stops_the_program_too_and_fg_continues_it(tmp_path: Path) -> None:
    def suspend_resume(proc: subprocess.Popen[bytes], where: Path) -> None:
        pid = _pid(where)
        # counting: stopped between its pid and its first count, it left no count to read
        until(lambda: (where / "count").exists(), "the program counting")
        proc.send_signal(signal.SIGTSTP)  # what a terminal's Ctrl-Z sends gpudiag's group
        if where.name == "plain":
            os.kill(pid, signal.SIGSTOP)  # plainly the job stops (pytest's group is orphaned)
        until(lambda: _state(proc.pid) == "T", "gpudiag stopped")
        until(lambda: _state(pid) == "T", "the program stopped")
        count = (where / "count").read_text()
        time.sleep(0.3)  # stopped: its counter must not move meanwhile
        assert (where / "count").read_text() == count
        proc.send_signal(signal.SIGCONT)  # fg
        if where.name == "plain":
            os.kill(pid, signal.SIGCONT)
        until(lambda: (where / "count").read_text() != count, "the program running again")
        (where / "gate").touch()

    plain, under = _both(tmp_path, "plain", suspend_resume)
    assert plain[0] == 0 and under == plain, _err(tmp_path)


OWN_GROUP = """
import os, signal, subprocess, sys
os.setpgrp()  # the "own process group, killpg(0) at the end" idiom
child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])
print('leads its group', os.getpgrp() == os.getpid(), flush=True)
signal.signal(signal.SIGTERM, signal.SIG_IGN)
os.killpg(0, signal.SIGTERM)
print('child ended by', child.wait())
"""
OWN_SESSION = """
import os
os.setsid()
print('leads its session', os.getsid(0) == os.getpid())
"""


@pytest.mark.slow
@pytest.mark.parametrize("program", [OWN_GROUP, OWN_SESSION], ids=["setpgrp", "setsid"])
def test_the_program_makes_its_own_group_or_session_as_plainly(tmp_path: Path,
                                                               program: str) -> None:
    plain = subprocess.run([sys.executable, "-c", program], capture_output=True, env=ENV,
                           timeout=60, stdin=subprocess.DEVNULL)
    under = subprocess.run([*_under(tmp_path / "runs"), sys.executable, "-c", program],
                           capture_output=True, env=ENV, cwd=REPO, timeout=120,
                           stdin=subprocess.DEVNULL)
    assert plain.returncode == 0 and b"True" in plain.stdout, plain.stderr
    assert (under.returncode, under.stdout) == (0, plain.stdout), under.stderr[-2000:]
    assert b"PermissionError" not in under.stderr


@pytest.mark.slow
def test_kill_9_of_gpudiag_ends_a_program_that_made_its_own_group(tmp_path: Path) -> None:
    marker = tmp_path / "pids"
    program = ("import os, subprocess, time\n"
               "os.setpgrp()\n"
               "child = subprocess.Popen(['sleep', '300'])\n"
               f"open({str(marker)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
               "time.sleep(300)\n")
    proc = subprocess.Popen([*_under(tmp_path / "runs"), sys.executable, "-c", program],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL, env=ENV, cwd=REPO)
    with ended(proc):
        text = until(lambda: marker.exists() and len(marker.read_text().split()) == 2 and
                     marker.read_text(), "the program and its child", 120)
        pids = [int(p) for p in text.split()]
        proc.kill()
        proc.wait(timeout=30)
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(process_alive(p) for p in pids):
        if time.monotonic() > deadline:
            for p in pids:
                if process_alive(p):
                    os.kill(p, signal.SIGKILL)
            pytest.fail(f"{pids} outlived a killed gpudiag by {GONE_WITHIN_S} s")
        time.sleep(0.05)
