"""On a terminal the program gets a terminal under `gpudiag run` (issue 26, case 12): its
stdout and stderr are terminals of the user's window size, resized with it, ``/dev/tty``
opens, and the saved copy keeps the program's own bytes (no CRLF). The user's terminal is a
real pseudo-terminal made by the test (os.openpty), the controlling terminal of the session
the program (plainly) or gpudiag runs in. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import fcntl
import os
import struct
import subprocess
import sys
import termios
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import REPO, findings_by_id, load_report, run_dirs, until

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
                   act: Callable[[int], None] | None = None) -> bytes:
    """``argv`` in a new session whose controlling terminal is a fresh pseudo-terminal of
    40x100, resized to 50x120 once the program is ready (or ``act`` done on the terminal's
    master end): what the terminal showed."""
    where.mkdir()
    master, slave = os.openpty()
    _set_size(slave, 40, 100)
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
        argv, stdin=subprocess.DEVNULL, stdout=slave, stderr=slave, env=ENV, cwd=REPO,
        start_new_session=True, preexec_fn=lambda: fcntl.ioctl(1, termios.TIOCSCTTY, 0))
    os.close(slave)
    try:
        until(lambda: (where / "ready").exists(), "the program ready", 120)
        if act is not None:
            act(master)
        else:
            _set_size(master, 50, 120)  # the kernel sends SIGWINCH to the foreground group
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
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
def test_a_program_that_opens_dev_tty_to_read_is_told_once(tmp_path: Path) -> None:
    """Under gpudiag run /dev/tty is the program's output pseudo-terminal, where what the
    user types does not arrive: a process holding it open to read is said once on
    gpudiag's side while it runs, and run.terminal warns with its pid."""
    if not Path("/dev/ptmx").exists():
        pytest.skip("no pseudo-terminals here")
    plain = _on_a_terminal([sys.executable, "-c", TTY_READER, str(tmp_path / "plain")],
                           tmp_path / "plain", lambda _: (tmp_path / "plain" / "gate").touch())
    logdir = tmp_path / "runs"

    def told(_: int) -> None:  # gpudiag has seen it: then the program may end
        until(lambda: any(b'"tty_read": true' in p.read_bytes() for p in logdir.glob(
            f"*/{layout.CHILDREN_DIR}/{layout.RUN_CHILD_NAME}/{layout.RUN_PROCESSES}")),
            "gpudiag sees /dev/tty open to read", 60)
        (tmp_path / "under" / "gate").touch()

    under = _on_a_terminal([sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir),
                            "--", sys.executable, "-c", TTY_READER, str(tmp_path / "under")],
                           tmp_path / "under", told)
    assert b"done\r\n" in plain and b"done\r\n" in under
    assert under.count(b"opened /dev/tty to read") == 1, under[-3000:]
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))["run.terminal"]
    assert found["status"] == "warn", found
    (reader,) = found["evidence"]["tty_readers"]
    assert f"pid {reader['pid']}" in found["message"] and "-c" in reader["command"]


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
