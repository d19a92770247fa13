"""The program's terminal: a pseudo-terminal like the user's, when gpudiag's own output is one.

Plainly, a program started from a terminal has its stdout and stderr on it: ``isatty`` is
true, the window has the terminal's size, ``/dev/tty`` opens, progress bars draw. Under
`gpudiag run` its output is read by gpudiag (to save it and to filter TensorFlow's log), so
each of its streams whose counterpart on gpudiag's side is a terminal gets a pseudo-terminal
of its own (stdout and stderr stay apart), with:

- the window size of gpudiag's terminal, copied again on every SIGWINCH (``Resizer``); the
  kernel then sends SIGWINCH to the program, whose controlling terminal the stdout (else
  stderr) pseudo-terminal is (gpudiag.procs.shim takes it with TIOCSCTTY);
- no output processing (``OPOST`` off): the bytes gpudiag reads are the program's own (no
  CRLF for LF), and the user's terminal translates them as it would plainly.

Hand-written on the standard library (os.openpty, termios, fcntl): ptyprocess and pexpect
start the child themselves on a single pseudo-terminal for stdin, stdout and stderr
together, which would merge the two streams gpudiag keeps apart, and would bypass the
process-group holder (gpudiag.procs.shim).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import struct
import termios
from collections.abc import Iterator, Sequence
from types import FrameType

from gpudiag.run import streams

_WINSIZE = "HHHH"


def is_terminal(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except (OSError, ValueError):
        return False


def window_size(fd: int) -> bytes | None:
    """The terminal's TIOCGWINSZ record (rows, columns, pixels), None if it has none."""
    try:
        return fcntl.ioctl(fd, termios.TIOCGWINSZ, struct.pack(_WINSIZE, 0, 0, 0, 0))
    except OSError:
        return None


def set_window_size(fd: int, size: bytes | None) -> None:
    if size is not None:
        with contextlib.suppress(OSError):
            fcntl.ioctl(fd, termios.TIOCSWINSZ, size)


def open_like(user_fd: int) -> tuple[int, int]:
    """A pseudo-terminal (reading end, program's end) with ``user_fd``'s window size and no
    output processing. OSError propagates (no pseudo-terminals here)."""
    reading, program = os.openpty()
    try:
        attrs = termios.tcgetattr(program)
        attrs[1] &= ~termios.OPOST  # oflag: the program's bytes as written
        termios.tcsetattr(program, termios.TCSANOW, attrs)
    except termios.error:
        pass
    set_window_size(program, window_size(user_fd))
    return reading, program


def program_ends(stdout_to_stderr: bool
                 ) -> tuple[tuple[int, int], tuple[int, int], list[tuple[int, int]]]:
    """(reading end, program's end) for the program's stdout and its stderr: a
    pseudo-terminal like gpudiag's where gpudiag's counterpart is a terminal (stdout's is
    gpudiag's stderr with ``stdout_to_stderr``), else a pipe; and the (user's fd, reading
    end) pairs a SIGWINCH resizes, the controlling one first."""
    ends, resize = [], []
    for user_fd in (2 if stdout_to_stderr else 1, 2):
        if is_terminal(user_fd):
            with contextlib.suppress(OSError):
                reading, program = open_like(user_fd)
                ends.append((reading, program))
                resize.append((user_fd, reading))
                continue
        reading, program = os.pipe()
        streams.grow_pipe(program)
        ends.append((reading, program))
    return ends[0], ends[1], resize


@contextlib.contextmanager
def resized(pairs: Sequence[tuple[int, int]]) -> Iterator[None]:
    """While active, SIGWINCH to gpudiag copies each (user's fd, pseudo-terminal's reading
    end) pair's window size again: the program gets its own SIGWINCH from the kernel."""
    if not pairs:
        yield
        return

    def on_winch(_signum: int, _frame: FrameType | None) -> None:
        for user_fd, reading in reversed(pairs):  # the controlling one (the first) last:
            # its SIGWINCH must find every stream of the program resized
            set_window_size(reading, window_size(user_fd))

    try:
        old = signal.signal(signal.SIGWINCH, on_winch)
    except ValueError:  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGWINCH, old)
