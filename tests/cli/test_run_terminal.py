"""On a terminal the program gets a terminal under `gpudiag run` (issue 26, case 12): its
stdout and stderr are terminals of the user's window size, resized with it, ``/dev/tty``
opens, and the saved copy keeps the program's own bytes (no CRLF). The user's terminal is a
real pseudo-terminal made by the test (os.openpty), the controlling terminal of the session
the program (plainly) or gpudiag runs in. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import signal
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, findings_by_id, load_report, run_dirs, until

from gpudiag import layout

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

PROGRAM = """
import os, pathlib, signal, sys, time
where = pathlib.Path(sys.argv[1])
print('ttys', os.isatty(0), os.isatty(1), os.isatty(2), flush=True)
print('size', tuple(os.get_terminal_size(1)), tuple(os.get_terminal_size(2)), flush=True)
tty = os.open('/dev/tty', os.O_WRONLY)
os.write(tty, b'said on /dev/tty\\n')
os.close(tty)
sys.stderr.write('progress 50%\\rprogress 100%\\n')
sizes = []
signal.signal(signal.SIGWINCH, lambda *_: sizes.append(tuple(os.get_terminal_size(2))))
(where / 'ready').touch()
while not sizes:
    time.sleep(0.01)
print('resized to', sizes[0], flush=True)
"""


def _set_size(fd: int, rows: int, cols: int) -> None:
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _on_a_terminal(argv: list[str], where: Path,
                   act: Callable[[int, bytearray, int], None] | None = None, *,
                   stdin_too: bool = False, modes: list[list[Any]] | None = None,
                   controlling: bool = True) -> bytes:
    """``argv`` in a new session whose controlling terminal is a fresh pseudo-terminal of
    40x100 (its stdin too where ``stdin_too``), resized to 50x120 once the program is
    ready (or ``act`` done on the terminal's master end, with what it showed so far):
    what the terminal showed. ``modes`` gets the terminal's mode before and after. Not
    ``controlling``: the session has no controlling terminal (a job started by a
    scheduler with its output on a terminal)."""
    where.mkdir()
    master, slave = os.openpty()
    _set_size(slave, 40, 100)
    held = os.dup(slave)  # the terminal's mode outlives the command's end
    if modes is not None:
        modes.append(termios.tcgetattr(slave))
    shown = bytearray()

    def read() -> None:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                return
            if not data:
                return
            shown.extend(data)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    proc = subprocess.Popen(
        argv, stdin=slave if stdin_too else subprocess.DEVNULL, stdout=slave, stderr=slave,
        env=ENV, cwd=REPO,
        start_new_session=True,
        preexec_fn=(lambda: fcntl.ioctl(1, termios.TIOCSCTTY, 0)) if controlling else None)
    os.close(slave)
    try:
        until(lambda: (where / "ready").exists(), "the program ready", 120)
        if act is not None:
            act(master, shown, proc.pid)
        else:
            _set_size(master, 50, 120)  # the kernel sends SIGWINCH to the foreground group
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if modes is not None:
        modes.append(termios.tcgetattr(held))
    os.close(held)
    reader.join(timeout=30)
    os.close(master)
    assert proc.returncode == 0, bytes(shown)[-3000:]
    return bytes(shown)


@pytest.mark.slow
def test_on_a_terminal_the_program_sees_the_terminal_it_would_plainly(tmp_path: Path) -> None:
    if not Path("/dev/ptmx").exists():
        pytest.skip("no pseudo-terminals here")
    plain = _on_a_terminal([sys.executable, "-c", PROGRAM, str(tmp_path / "plain")],
                           tmp_path / "plain")
    logdir = tmp_path / "runs"
    under = _on_a_terminal([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(logdir), "--", sys.executable, "-c", PROGRAM,
                            str(tmp_path / "under")], tmp_path / "under")
    assert b"ttys False True True\r\n" in plain
    assert b"size (100, 40) (100, 40)\r\n" in plain
    assert b"resized to (120, 50)\r\n" in plain
    for line in plain.split(b"\r\n"):  # each line the program showed (the two streams'
        assert line in under, (line, under[-3000:])  # order between them is the kernel's)
    (run_dir,) = run_dirs(logdir)
    program_dir = run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME
    saved_out = (program_dir / layout.RUN_STDOUT).read_bytes()
    assert saved_out == (b"ttys False True True\nsize (100, 40) (100, 40)\n"
                         b"said on /dev/tty\nresized to (120, 50)\n"), saved_out
    assert (program_dir / layout.RUN_STDERR).read_bytes() == b"progress 50%\rprogress 100%\n"


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


@pytest.mark.slow
def test_ctrl_z_at_a_prompt_gives_the_terminal_back_and_fg_takes_it_again(
        tmp_path: Path) -> None:
    """Ctrl-Z typed while the keys are relayed stops gpudiag and the program, and the
    user's terminal has its own mode back for the shell while they are stopped; after
    ``fg`` (SIGCONT) the keys are relayed again and the prompt gets its answer."""
    if not Path("/dev/ptmx").exists():
        pytest.skip("no pseudo-terminals here")
    logdir = tmp_path / "runs"
    program = ("import getpass, pathlib, sys; pathlib.Path(sys.argv[1], 'ready').touch(); "
               "print('got', len(getpass.getpass('Password: ')))")

    def relaying(master: int) -> bool:
        return not termios.tcgetattr(master)[3] & termios.ICANON

    def suspend_resume(master: int, shown: bytearray, pid: int) -> None:
        until(lambda: b"Password: " in shown, "the password prompt", 120)
        until(lambda: relaying(master), "the keyboard relayed", 30)
        os.write(master, b"\x1a")  # Ctrl-Z: SIGTSTP to gpudiag's group
        until(lambda: _state(pid) == "T", "gpudiag stopped", 30)
        assert not relaying(master)  # the user's mode, for the shell
        os.kill(pid, signal.SIGCONT)  # fg
        until(lambda: relaying(master), "the keyboard relayed again", 30)
        os.write(master, b"abc\r")

    under = _on_a_terminal([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(logdir), "--", sys.executable, "-c", program,
                            str(tmp_path / "under")], tmp_path / "under", suspend_resume,
                           stdin_too=True)
    assert b"got 3\r\n" in under, under[-2000:]


ASKS = """
import getpass, hashlib, os, pathlib, sys
where = pathlib.Path(sys.argv[1])
(where / 'ready').touch()
secret = getpass.getpass('Password: ')  # /dev/tty, echo off
print('got', hashlib.sha256(secret.encode()).hexdigest()[:12], flush=True)
with open('/dev/tty', 'w') as out, open('/dev/tty') as keys:  # asked there, echo on
    out.write('continue? ')
    out.flush()
    answer = keys.readline()
print('answer', repr(answer), 'stdin is a terminal', os.isatty(0), flush=True)
"""
SECRET = b"hunter2-not-shown"


def _type_when_asked(master: int, shown: bytearray, _pid: int) -> None:
    """Answers the two prompts as a user would, each once it is on the screen and the
    terminal takes keys one by one (under gpudiag: the relay has taken it; plainly the
    program's line discipline is the terminal's own, which takes a whole line)."""
    def relaying() -> bool:
        return not termios.tcgetattr(master)[3] & termios.ICANON

    until(lambda: b"Password: " in shown, "the password prompt", 120)
    if b"gpudiag" in shown:  # under gpudiag (its first lines are on the screen)
        until(relaying, "the keyboard relayed", 30)
    os.write(master, SECRET + b"\r")
    until(lambda: b"continue? " in shown, "the second prompt", 60)
    if b"gpudiag" in shown:
        until(relaying, "the keyboard relayed", 30)
    os.write(master, b"yes\r")


@pytest.mark.slow
def test_what_the_user_types_reaches_a_program_reading_dev_tty(tmp_path: Path) -> None:
    """getpass and a question asked on /dev/tty get their answers as plainly: what the
    user types is passed into the program's pseudo-terminal while a process reads it,
    the password is echoed nowhere (screen, saved output), the answer is echoed as
    plainly, and the user's terminal has its own mode back at the end."""
    if not Path("/dev/ptmx").exists():
        pytest.skip("no pseudo-terminals here")
    plain_modes: list[list[Any]] = []
    plain = _on_a_terminal([sys.executable, "-c", ASKS, str(tmp_path / "plain")],
                           tmp_path / "plain", _type_when_asked, stdin_too=True,
                           modes=plain_modes)
    logdir, modes = tmp_path / "runs", []
    under = _on_a_terminal([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(logdir), "--", sys.executable, "-c", ASKS,
                            str(tmp_path / "under")], tmp_path / "under", _type_when_asked,
                           stdin_too=True, modes=modes)
    digest = hashlib.sha256(SECRET).hexdigest()[:12].encode()
    expected = [b"Password: \r\n", b"got " + digest + b"\r\n",
                b"continue? yes\r\n",
                b"answer 'yes\\n' stdin is a terminal True\r\n"]
    for line in expected:
        assert line in plain, (line, plain[-2000:])
        assert line in under, (line, under[-3000:])
    (run_dir,) = run_dirs(logdir)
    program_dir = run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME
    saved = b"".join(p.read_bytes() for p in program_dir.iterdir() if p.is_file())
    assert SECRET not in under and SECRET not in plain and SECRET not in saved
    assert modes[1] == modes[0], (modes, plain_modes)  # the user's terminal as it was
    found = findings_by_id(load_report(run_dir))["run.terminal"]
    assert found["status"] == "ok", found
    assert {r["relayed"] for r in found["evidence"]["tty_readers"]} == {True}, found
    assert b"opened /dev/tty to read" not in under


TTY_READER = """
import os, pathlib, sys, time
where = pathlib.Path(sys.argv[1])
tty = os.open('/dev/tty', os.O_RDWR | os.O_NOCTTY)  # as getpass opens it
(where / 'ready').touch()
while not (where / 'gate').exists():
    time.sleep(0.01)
os.close(tty)
print('done', flush=True)
"""


@pytest.mark.slow
def test_with_no_terminal_to_take_keys_from_a_dev_tty_reader_is_told_once(
        tmp_path: Path) -> None:
    """gpudiag's output is a terminal but gpudiag has no controlling terminal (nothing to
    read keys from): a process holding the program's /dev/tty open to read is said once
    on gpudiag's side while it runs, and run.terminal warns with its pid."""
    if not Path("/dev/ptmx").exists():
        pytest.skip("no pseudo-terminals here")
    logdir = tmp_path / "runs"

    def told(*_: object) -> None:  # gpudiag has seen it: then the program may end
        until(lambda: any(b'"tty_read": true' in p.read_bytes() for p in logdir.glob(
            f"*/{layout.CHILDREN_DIR}/{layout.RUN_CHILD_NAME}/{layout.RUN_PROCESSES}")),
            "gpudiag sees /dev/tty open to read", 60)
        (tmp_path / "under" / "gate").touch()

    under = _on_a_terminal([sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir),
                            "--", sys.executable, "-c", TTY_READER, str(tmp_path / "under")],
                           tmp_path / "under", told, controlling=False)
    assert b"done\r\n" in under
    assert under.count(b"opened /dev/tty to read") == 1, under[-3000:]
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))["run.terminal"]
    assert found["status"] == "warn", found
    (reader,) = found["evidence"]["tty_readers"]
    assert f"pid {reader['pid']}" in found["message"] and "-c" in reader["command"]
    assert reader["relayed"] is False


@pytest.mark.slow
def test_with_no_terminal_run_terminal_says_the_streams_are_pipes(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir),
                           "--", sys.executable, "-c", "print('x')"], capture_output=True,
                          env=ENV, cwd=REPO, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))["run.terminal"]
    assert found["status"] == "skip" and "pipes" in found["message"]
