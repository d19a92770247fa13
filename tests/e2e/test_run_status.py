"""`gpudiag run`'s status line: on a terminal (a real pseudo-terminal here, read as a
person would see it), one line with the step, loss, rate and each GPU's utilization that
never tears the program's lines; none on a pipe or with --quiet, where the output is the
program's bytes. NVML is the fake backend (tests/fake_nvml.py)."""

from __future__ import annotations

import fcntl
import io
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import REPO, TESTS_DIR, gpudiag, split_own_lines

from gpudiag.run import statusline

PY = sys.executable
FAKE = str(TESTS_DIR / "gpudiag_with_fake_nvml.py")
STATUS = statusline.PREFIX.encode()
# No TensorFlow: lines on both streams for about 1.5 s (the status line is redrawn every
# second), and one line left open for 0.6 s.
TALKER = ("import sys, time\n"
          "for k in range(15):\n"
          "    print(f'out {k} ' + 'o' * 20, flush=True)\n"
          "    if k % 5 == 0:\n"
          "        print(f'err {k}', file=sys.stderr, flush=True)\n"
          "    time.sleep(0.1)\n"
          "print('open line,', end='', flush=True)\n"
          "time.sleep(0.6)\n"
          "print(' closed', flush=True)\n")
TALKER_OUT = b"".join(f"out {k} {'o' * 20}\n".encode() for k in range(15)) + \
    b"open line, closed\n"
TALKER_ERR = b"err 0\nerr 5\nerr 10\n"


def screen(raw: bytes) -> list[str]:
    """What a terminal shows after ``raw``: carriage return, newline, erase to the end of
    the line; colours and other escapes dropped."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-JL-Za-z]|\x1b\][^\x07]*\x07", "",
                  raw.decode("utf-8", "replace"))
    lines, col, i = [""], 0, 0
    while i < len(text):
        if text.startswith("\x1b[K", i):
            lines[-1] = lines[-1][:col]
            i += 3
            continue
        ch = text[i]
        if ch == "\r":
            col = 0
        elif ch == "\n":
            lines.append("")
            col = 0
        else:
            line = lines[-1].ljust(col)
            lines[-1] = line[:col] + ch + line[col + 1:]
            col += 1
        i += 1
    return lines


def on_pty(argv: list[str], on_output: Callable[[bytes], None] | None = None,
           timeout_s: float = 240) -> tuple[int, bytes]:
    """Run ``argv`` with a pseudo-terminal (160 columns) as stdin, stdout and stderr;
    everything the terminal received. ``on_output`` sees it as it grows."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 160, 0, 0))
    proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                            start_new_session=True, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    os.close(slave)
    raw, end = b"", time.monotonic() + timeout_s
    try:
        while time.monotonic() < end:
            ready, _, _ = select.select([master], [], [], 0.1)
            if not ready:
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: every holder of the terminal has closed it
                break
            if not data:
                break
            raw += data
            if on_output is not None:
                on_output(raw)
        return proc.wait(timeout=max(end - time.monotonic(), 1)), raw
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -------------------------------------------------------------------------- the Terminal


def test_the_status_line_waits_for_an_open_line_and_is_cleared_before_any_write() -> None:
    err, out = io.BytesIO(), io.BytesIO()
    terminal = statusline.Terminal(err, lambda: "step 3 | " + "x" * 200)
    terminal.draw()
    assert err.getvalue() == b"\r" + STATUS + b"step 3 | " + b"x" * 60 + b"\x1b[K"  # 80 - 1
    terminal.write(out, b"half")  # clears, writes; the line is open now
    assert err.getvalue().endswith(b"\x1b[K" + statusline.CLEAR) and out.getvalue() == b"half"
    before = err.getvalue()
    terminal.draw()
    assert err.getvalue() == before  # never inside the program's open line
    terminal.write(out, b" done\n")
    terminal.draw()
    assert err.getvalue().count(STATUS) == 2
    said: list[str] = []
    terminal.say(said.append)("12:00:00 gpudiag: a finding")
    assert err.getvalue().endswith(statusline.CLEAR) and said == ["12:00:00 gpudiag: a finding"]
    terminal.draw()
    terminal.close()
    assert err.getvalue().endswith(statusline.CLEAR)
    terminal.draw()
    assert err.getvalue().endswith(statusline.CLEAR)  # closed: never drawn again
    assert out.getvalue() == b"half done\n"


# --------------------------------------------------------------- a real `gpudiag run`


@pytest.mark.slow
def test_on_a_terminal_the_status_line_shows_steps_loss_and_gpus_and_never_tears_a_line(
        tmp_path: Path) -> None:
    gate = tmp_path / "gate"

    def open_gate_once_the_status_has_steps(raw: bytes) -> None:
        # after the program's 30 steps, the status line has them (and NVML's GPUs)
        _, _, after = raw.partition(b"waiting after 30 steps")
        if not gate.exists() and re.search(rb"\[gpudiag\] step 30 \| loss [0-9.e+-]+ \| "
                                           rb"[0-9.]+ steps/s \| GPU0 90% GPU1 90%", after):
            gate.touch()

    code, raw = on_pty([PY, FAKE, "busy", "run", "--logdir", str(tmp_path / "runs"), "--",
                        PY, str(TESTS_DIR / "programs" / "steps_then_talks.py"), str(gate)],
                       open_gate_once_the_status_has_steps)
    assert gate.exists(), raw[-3000:]
    assert code in (0, 1), raw[-3000:]  # 1: a check failed (no GPU here)
    shown = screen(raw)
    # every line of the program whole, on a line of its own, in order; nothing left of
    # the status line once gpudiag is done
    talk = [line for line in shown if line.startswith("talk ")]
    assert talk == [f"talk {k} {'x' * 30}" for k in range(40)]
    assert [line for line in shown if line.startswith("err ")] == \
        [f"err {k}" for k in range(0, 40, 8)]
    assert "half a line, then the rest" in shown  # never drawn inside an open line
    assert not [line for line in shown if "[gpudiag]" in line]
    # it was drawn, and redrawn while the program talked (at most about once a second)
    talking = raw[raw.index(b"talk 0"):raw.index(b"done")]
    assert 1 <= talking.count(STATUS) <= 6, talking.count(STATUS)


@pytest.mark.slow
def test_on_a_pipe_there_is_no_status_line_and_the_output_is_the_programs(
        tmp_path: Path) -> None:
    proc = gpudiag("run", "--logdir", str(tmp_path / "runs"), "--", PY, "-c", TALKER,
                   fake_nvml="busy")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.encode() == TALKER_OUT
    _, program_err, _ = split_own_lines(proc.stderr.encode(), "run")
    assert program_err == TALKER_ERR
    assert "[gpudiag]" not in proc.stderr and "\x1b[K" not in proc.stderr


@pytest.mark.slow
def test_with_quiet_a_terminal_gets_no_status_line(tmp_path: Path) -> None:
    code, raw = on_pty([PY, FAKE, "busy", "run", "--quiet", "--logdir",
                        str(tmp_path / "runs"), "--", PY, "-c", TALKER])
    assert code == 0, raw[-3000:]
    assert STATUS not in raw and b"\x1b[K" not in raw
    shown = screen(raw)
    assert [line for line in shown if line.startswith("out ")] == \
        [f"out {k} {'o' * 20}" for k in range(15)]
    assert "open line, closed" in shown
