"""Descendants that outlive the program: named, left running, their output still shown.

The program's end is its own exit. A process it started in a session of its own
(``subprocess.Popen(..., start_new_session=True)``, a daemon) left gpudiag's reach on
purpose and would outlive the program plainly too, so gpudiag leaves it running. If it
still holds the program's stdout or stderr, gpudiag names it by its pid (found in
/proc: the processes with that pipe or terminal open) and hands the pipe to a ``cat``
in a session of its own, which goes on copying the descendant's output to gpudiag's
terminal after gpudiag has ended, as plainly it would have reached it directly (not
filtered, not saved). Without /proc (not Linux) the pids are not known; without ``cat``
the pipe is closed and the descendant's later writes fail (EPIPE).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import BinaryIO

from gpudiag.procs import group as procs
from gpudiag.procs import stops
from gpudiag.run import streams

PROC = Path("/proc")


@dataclass(frozen=True)
class Survivor:
    pid: int
    command: str  # its command line, as /proc has it


def end_name(fd: int) -> str | None:
    """What /proc/PID/fd shows for a process holding the other end of ``fd``: the pipe
    (``pipe:[inode]``) or, for a pty's writing end, its terminal's path."""
    with contextlib.suppress(OSError):
        if os.isatty(fd):
            return os.ttyname(fd)
        return f"pipe:[{os.fstat(fd).st_ino}]"
    return None


def holders(names: set[str]) -> list[Survivor]:
    """The processes other than gpudiag holding any of ``names`` open (by /proc)."""
    found: list[Survivor] = []
    me = os.getpid()
    with contextlib.suppress(OSError):
        for entry in PROC.iterdir():
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            if _held(entry) & names:
                found.append(Survivor(int(entry.name), _cmdline(entry)))
    return sorted(found, key=lambda s: s.pid)


def _held(entry: Path) -> set[str]:
    out: set[str] = set()
    try:
        fds = list((entry / "fd").iterdir())
    except OSError:  # gone, or not ours to read
        return out
    for fd in fds:
        with contextlib.suppress(OSError):
            out.add(str(fd.readlink()))
    return out


def _cmdline(entry: Path) -> str:
    try:
        raw = (entry / "cmdline").read_bytes()
    except OSError:
        return "?"
    return " ".join(p.decode("utf-8", "replace") for p in raw.split(b"\0") if p)[:200]


def hand_over(fd: int, out_fd: int) -> int | None:
    """Start ``cat`` copying ``fd`` to ``out_fd`` in a session of its own (it ends when the
    last writer closes the pipe); close ``fd`` here. Returns cat's pid (None: no cat)."""
    pid = None
    cat = shutil.which("cat")
    if cat is not None:
        with contextlib.suppress(OSError):
            pid = subprocess.Popen([cat], stdin=fd, stdout=out_fd, stderr=subprocess.DEVNULL,
                                   start_new_session=True).pid
    os.close(fd)
    return pid


#: Once the program has ended, how long its output may go on coming before gpudiag asks
#: who still writes it: a descendant (then the pipe is handed over) or nobody (then it is
#: what the program wrote before its end, still in the pipe: read to the end).
AFTER_END_S = 1.0


@dataclass(frozen=True)
class Settled:
    """How the program's output ended: who outlived it holding it, and the forwarders."""

    survivors: tuple[Survivor, ...] = ()
    forwarders: tuple[int, ...] = ()
    held: bool = False  # some output was still held open after the program ended


HELD_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP wait until the block is done (then each is raised again
    for its own handler): a pipe handed to its forwarder is also marked so, never closed
    here without it. Held at Python's level, by handlers that only note the signal:
    blocking it in the main thread is not enough, since the kernel then gives it to
    another thread (the pumps') and Python runs the handler in the main thread anyway."""
    noted: list[int] = []

    def note(signum: int, _frame: FrameType | None) -> None:
        noted.append(signum)

    if threading.current_thread() is not threading.main_thread():
        yield  # handlers are set, and run, in the main thread only
        return
    # a handler set outside Python (None here) could not be put back: left as it is
    handlers = {sig: signal.signal(sig, note) for sig in HELD_SIGNALS
                if signal.getsignal(sig) is not None}
    try:
        yield
    finally:
        for held, handler in handlers.items():
            signal.signal(held, handler)
        for signum in dict.fromkeys(noted):
            signal.raise_signal(signum)


def settle(pumps: list[streams.Pump], ends: set[str], shows: list[BinaryIO]) -> Settled:
    """Once the program has ended: let each pump read what is still coming, then hand
    any pipe a descendant still holds to a forwarder (``hand_over``). Called again after a
    signal interrupted it, it goes on where it was: a pipe is handed over once."""
    for p in pumps:
        p.program_ended()
    deadline = time.monotonic() + AFTER_END_S
    for p in pumps:  # Pump.done, not join: see there
        p.done.wait(max(0.0, deadline - time.monotonic()))
    talking = [p for p in pumps if not p.done.is_set()]
    if talking and (holders(ends) or not PROC.is_dir()):
        for p in talking:
            p.stop_now()
    for p in pumps:  # stopped after one chunk, or at end-of-file once the backlog is read;
        while not p.done.wait(procs.WAIT_POLL_S):  # in slices, as gpudiag.procs.group.wait
            stops.check()
    held = [(p, show) for p, show in zip(pumps, shows, strict=True) if not p.eof]
    if not held:
        return Settled()
    survivors = holders(ends)
    for p, show in held:
        if p.handed_over:  # by a settle a signal interrupted: its pipe is closed here
            continue
        with contextlib.suppress(OSError, ValueError):
            show.flush()
        with _signals_held():  # handed over and said so, or neither
            p.forwarder = hand_over(p.fd, show.fileno())
            p.handed_over = True
    forwarders = [p.forwarder for p, _ in held if p.forwarder is not None]
    return Settled(tuple(s for s in survivors if s.pid not in forwarders), tuple(forwarders),
                   held=True)
