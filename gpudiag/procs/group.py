"""Child processes that never outlive gpudiag, however gpudiag ends.

Every process gpudiag starts (a probe's TensorFlow child, the command `monitor` or `run`
watches) is started by ``spawn`` as the leader of a process group of its own, so that
its grandchildren (``sh -c 'sleep 300 & sleep 300'``) can be ended with it by one
``killpg``. Three ways a run can end, three ways the groups end with it:

- normally, or by an exception: the caller stops the group (``stop_group``);
- Ctrl-C, SIGTERM, SIGHUP: the CLI turns the signal into ``Interrupted`` (a
  KeyboardInterrupt), which reaches the same ``stop_group`` calls;
- ``kill -9`` of gpudiag, where no code of gpudiag's can run: a small watchdog process
  (``python -m gpudiag.procs.reaper``, in a session of its own) holds the read end of a pipe
  whose only write end is gpudiag's. The kernel closes that end when gpudiag dies, the
  watchdog reads end-of-file and ends every group it was told about (SIGTERM, then
  SIGKILL after a grace period).

The user's program (`run`) is started by ``spawn_program`` through gpudiag.procs.shim, the
leader of its group, so that the program itself is no group leader and can call
``os.setpgrp()`` / ``os.setsid()`` as plainly. A group the program makes that way has
its pid as id: it is watched and ended too (``groups_of``).

The watchdog learns of a group by a line ``+PGID`` and forgets it by ``-PGID``
(gpudiag.procs.reaper.WATCH / UNWATCH). It starts on the first ``spawn`` (one Python process
without TensorFlow, a few MiB) and ends by itself when gpudiag exits.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from gpudiag.procs import stdstreams, stops
from gpudiag.procs.reaper import UNWATCH, WATCH, end_groups, group_alive, signal_groups

#: (signal, seconds to wait after it) to end a group: polite first, then certain.
STOP_SEQUENCE: tuple[tuple[signal.Signals, float], ...] = (
    (signal.SIGTERM, 3.0),
    (signal.SIGKILL, 5.0),
)


class _Watchdog:
    """The write end of the pipe to gpudiag.procs.reaper, opened on first use."""

    def __init__(self) -> None:
        self._pipe: IO[bytes] | None = None
        self._proc: subprocess.Popen[bytes] | None = None

    def _open(self) -> IO[bytes] | None:
        if self._pipe is None:
            read_fd, write_fd = os.pipe()  # both non-inheritable: no child keeps it open
            try:
                self._proc = subprocess.Popen(
                    [sys.executable, "-m", "gpudiag.procs.reaper"], stdin=read_fd,
                    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                    start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"},
                )
            except OSError:
                os.close(write_fd)
                return None  # no watchdog: the in-process stop paths still hold
            finally:
                os.close(read_fd)
            self._pipe = os.fdopen(write_fd, "wb", buffering=0)
        return self._pipe

    def start(self) -> None:
        """Start the watchdog process now (it otherwise starts on the first ``tell``)."""
        self._open()

    def tell(self, line: str) -> None:
        pipe = self._open()
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.write(line.encode() + b"\n")


_watchdog = _Watchdog()
SHIM = Path(__file__).resolve().with_name("shim.py")
GATE = SHIM.with_name("gate.py")
#: The shim's pid -> the program's pid: the group the program may make of its own.
_programs: dict[int, int] = {}


def groups_of(proc: subprocess.Popen[bytes]) -> set[int]:
    """The process groups that end with ``proc``: its own, and for a program started by
    ``spawn_program``, the one the program may have made (``os.setpgrp``, ``os.setsid``)."""
    program = _programs.get(proc.pid)
    return {proc.pid} if program is None else {proc.pid, program}


def program_pid(proc: subprocess.Popen[bytes]) -> int:
    """The program's own pid (the shim's child), else ``proc.pid``."""
    return _programs.get(proc.pid, proc.pid)


def program_ended(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the program itself has ended (gone, or a zombie its holder has yet to
    reap), though ``proc`` (the shim) may not have returned yet."""
    pid = _programs.get(proc.pid)
    if pid is None:
        return proc.poll() is not None
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except ProcessLookupError:
        return True
    except (OSError, IndexError):
        return False  # cannot tell: taken as running
    return state == "Z"


def spawn_program(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """Like ``spawn``, but the program runs as the shim's child in the shim's new session and
    group (gpudiag.procs.shim): not a group leader itself. The returned Popen is the shim's;
    its exit status is the program's. OSError (the program could not be executed)
    propagates, as from ``spawn``."""
    read_fd, write_fd = os.pipe()
    try:
        closed = ",".join(map(str, sorted(stdstreams.CLOSED_AT_START))) or "-"
        proc = spawn([sys.executable, "-I", "-S", str(SHIM), str(write_fd), closed, *argv],
                     pass_fds=(write_fd,), **popen_kwargs)
    finally:
        os.close(write_fd)
    try:
        with os.fdopen(read_fd, "rb") as report:
            line = report.readline().strip()
        if line[:1] == b"P":
            _programs[proc.pid] = int(line[1:])
            _watchdog.tell(f"{WATCH}{_programs[proc.pid]}")
            return proc
        code = int(line[1:]) if line[:1] == b"E" and line[1:].isdigit() else 0
    except BaseException:
        stop_group(proc)
        raise
    stop_group(proc)
    raise OSError(code, os.strerror(code) if code else "the program could not be started",
                  argv[0])


def spawn(argv: Sequence[str], **popen_kwargs: Any) -> subprocess.Popen[bytes]:
    """``subprocess.Popen(argv, ...)`` as the leader of a new process group (and session),
    watched by the reaper until ``release`` or ``stop_group``. OSError propagates.

    The watchdog is started before the child, and the child waits at its gate
    (gpudiag.procs.gate) until the watchdog has been told its group; an interrupt (Ctrl-C,
    SIGTERM) that lands meanwhile stops the group before it propagates. So there is no
    moment at which a child runs that neither the caller nor the watchdog will end, a
    ``kill -9`` of gpudiag included. A stop request a callback dropped is raised first
    (gpudiag.procs.stops.check): no child is started after it."""
    stops.check()
    _watchdog.start()
    go_r, go_w = os.pipe()
    err_r, err_w = os.pipe()
    passed = (*popen_kwargs.pop("pass_fds", ()), go_r, err_w)
    with os.fdopen(go_w, "wb", buffering=0) as go, os.fdopen(err_r, "rb") as err:
        try:
            proc: subprocess.Popen[bytes] = subprocess.Popen(
                [sys.executable, "-I", "-S", str(GATE), str(go_r), str(err_w), *argv],
                start_new_session=True, pass_fds=passed, **popen_kwargs)
        finally:
            os.close(go_r)
            os.close(err_w)
        try:
            _watchdog.tell(f"{WATCH}{proc.pid}")
            with contextlib.suppress(BrokenPipeError):  # the gate died: its status tells
                go.write(b"1")
            failed = err.read()
        except BaseException:
            stop_group(proc)
            raise
    if failed:
        stop_group(proc)
        code = int(failed) if failed.isdigit() else 0
        raise OSError(code, os.strerror(code) if code else "it could not be executed",
                      argv[0])
    return proc


#: How often a wait for a child looks for a signal handled meanwhile (:func:`wait`).
WAIT_POLL_S = 0.25


def wait(proc: subprocess.Popen[Any], timeout_s: float | None = None) -> int:
    """``proc.wait()`` (``timeout_s``: subprocess.TimeoutExpired after it), but never
    blocked in one waitpid for ever: the child is waited for in slices, so that a signal
    whose C-level handler ran while the main thread was entering the wait (after Python
    last checked for signals, before the kernel put it to sleep: the signal is then taken
    without interrupting the wait) gets its Python handler (gpudiag's SIGTERM) within a
    slice instead of when the child ends. Under load, a `timeout` around `gpudiag run`
    lost its SIGTERM about one time in ten this way. Each slice also raises a stop request
    a callback dropped (gpudiag.procs.stops.check)."""
    deadline = time.monotonic() + (float("inf") if timeout_s is None else timeout_s)
    while True:
        stops.check()
        try:
            return proc.wait(timeout=max(0.0, min(WAIT_POLL_S, deadline - time.monotonic())))
        except subprocess.TimeoutExpired:
            if time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(proc.args, timeout_s or 0.0) from None


def signal_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    """Send ``sig`` to the child's whole process group (nothing if it is gone)."""
    signal_groups(groups_of(proc), sig)


def stop_group(proc: subprocess.Popen[bytes],
               sequence: Sequence[tuple[int | None, float]] = STOP_SEQUENCE) -> None:
    """End the child and everything in its process group: each (signal, wait) in turn
    until the group is gone; ``None`` as the signal only waits. Always reaps the child."""
    for sig, wait_s in sequence:
        if sig is not None:
            signal_group(proc, sig)
        try:
            proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            continue
        except KeyboardInterrupt:  # a second Ctrl-C or signal while stopping: at once
            signal_group(proc, signal.SIGKILL)
            break
        if not any(map(group_alive, groups_of(proc))):
            break
        # the leader is gone but grandchildren remain: go on with the next signal
    else:
        signal_group(proc, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=5.0)
    release(proc)


def release(proc: subprocess.Popen[bytes]) -> None:
    """The group needs no watching any more: its leader was waited for. Grandchildren
    left in the group are ended first (SIGTERM, then SIGKILL after the reaper's grace
    period): nothing started by gpudiag outlives its run."""
    groups = groups_of(proc)
    if proc.returncode is not None:
        end_groups({g for g in groups if group_alive(g)})
    for pgid in groups:
        _watchdog.tell(f"{UNWATCH}{pgid}")
    _programs.pop(proc.pid, None)
