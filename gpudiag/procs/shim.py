"""The holder of the program's process group: ``python -I -S shim.py REPORT_FD CLOSED ARGV...``
(CLOSED: the standard fds gpudiag's caller had closed, comma-separated, or ``-``).

gpudiag starts this small process (stdlib only, no site, no hooks: tens of milliseconds)
as the leader of a new session and process group. It starts the user's program as its
child, in that group: the program is not a group leader, so ``os.setpgrp()`` and
``os.setsid()`` work in it as they do plainly, while everything the program starts without
leaving the group still ends with one ``killpg`` (gpudiag.procs.group, the reaper).

It writes one line to REPORT_FD: the program's pid once it is executing (``P1234``), or
``E<errno>`` when it could not be executed. Then it waits for the program and ends the
way the program ended (its exit code, or death by the same signal without a core file),
so that gpudiag's ``wait`` sees the program's own status.

When the program's stdout or stderr is a pseudo-terminal (gpudiag.run.terminal), the shim
makes it the session's controlling terminal first (``/dev/tty``, SIGWINCH).

Signals: the dispositions the shim inherited (SIG_IGN under ``nohup``, else the default)
are what the program gets; the shim itself ignores the ones gpudiag passes on to the group
(so it lives to report the program's status) and stops and continues with the group.
Its own stdin/stdout/stderr are the program's and are let go (``/dev/null``) once the
program runs: only the program and its descendants hold the program's output.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import resource
import signal
import sys
import termios

#: Passed on to the whole group by gpudiag; the shim outlives them to report the status.
IGNORED_HERE = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
#: Set by Python at start (SIG_IGN); the program gets the default, as subprocess gives it.
PYTHON_SET = (signal.SIGPIPE, getattr(signal, "SIGXFSZ", signal.SIGPIPE))


def _exec(argv: list[str], inherited_ignored: set[signal.Signals], err_w: int) -> None:
    """In the forked child: the inherited dispositions back, then the program."""
    try:
        for sig in IGNORED_HERE:
            signal.signal(sig, signal.SIG_IGN if sig in inherited_ignored else signal.SIG_DFL)
        for sig in PYTHON_SET:
            signal.signal(sig, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(err_w, str(exc.errno or 0).encode())
    finally:
        os._exit(127)


def _end_like(status: int) -> None:
    """End as the program ended: its exit code, or its signal (no core file here)."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        with contextlib.suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        with contextlib.suppress(OSError, ValueError):  # SIGKILL has no handler to reset
            signal.signal(sig, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)  # a signal that does not end a process by default
    os._exit(os.waitstatus_to_exitcode(status))


def _take_terminal() -> None:
    """The program's stdout (else stderr) pseudo-terminal (gpudiag.run.terminal) becomes
    this new session's controlling terminal: ``/dev/tty`` opens in the program, and the
    kernel sends it SIGWINCH when gpudiag resizes the window."""
    for fd in (1, 2):
        if os.isatty(fd):
            with contextlib.suppress(OSError):
                fcntl.ioctl(fd, termios.TIOCSCTTY, 0)
                return


def main(args: list[str]) -> None:
    report_fd, argv = int(args[0]), args[2:]
    closed = [int(fd) for fd in args[1].split(",") if fd.isdigit()]
    inherited_ignored = {s for s in IGNORED_HERE if signal.getsignal(s) == signal.SIG_IGN}
    for sig in IGNORED_HERE:
        signal.signal(sig, signal.SIG_IGN)
    _take_terminal()
    err_r, err_w = os.pipe()  # close-on-exec: end-of-file alone means the exec worked
    pid = os.fork()
    if pid == 0:
        os.close(err_r)
        for fd in closed:  # closed by gpudiag's caller: closed for the program, as plainly
            os.close(fd)
        _exec(argv, inherited_ignored, err_w)
    os.close(err_w)
    failed = os.read(err_r, 64)
    os.close(err_r)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)
    if failed:
        os.waitpid(pid, 0)
        os.write(report_fd, b"E" + failed + b"\n")
        os._exit(127)
    os.write(report_fd, f"P{pid}\n".encode())
    os.close(report_fd)
    while True:
        _, status = os.waitpid(pid, 0)
        if os.WIFEXITED(status) or os.WIFSIGNALED(status):
            _end_like(status)


if __name__ == "__main__":
    main(sys.argv[1:])
