"""Ctrl-Z and ``fg``/``bg`` reach the watched program: job control works as plainly.

The program runs in a session of its own (gpudiag.procs.group), so the terminal's SIGTSTP
reaches gpudiag only. While ``passed_on`` is active, gpudiag's SIGTSTP handler stops the
program's groups, then gpudiag itself; the SIGCONT that the shell's ``fg`` or ``bg`` sends
gpudiag is passed on to them. The program's groups are orphaned for the kernel (their
session has no terminal), where SIGTSTP's default action is discarded: they get SIGTSTP
(a handler of the program's runs) and SIGSTOP (they stop, handler or not). A SIGTSTP the
caller ignored stays ignored.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Protocol

from gpudiag.procs.reaper import signal_groups


class Stoppable(Protocol):
    """Something of gpudiag's that must let go of the terminal while gpudiag is stopped
    (gpudiag.run.keyboard: the user's terminal mode)."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


@contextlib.contextmanager
def passed_on(groups: Callable[[], set[int]],
              around: Stoppable | None = None) -> Iterator[None]:
    """SIGTSTP and SIGCONT to gpudiag reach the process groups ``groups()`` while active;
    ``around`` pauses before gpudiag stops and resumes after it continues."""

    def on_tstp(_signum: int, _frame: FrameType | None) -> None:
        signal_groups(groups(), signal.SIGTSTP)
        signal_groups(groups(), signal.SIGSTOP)
        if around is not None:
            around.pause()
        os.kill(os.getpid(), signal.SIGSTOP)  # SIGSTOP: never discarded, whatever the group

    def on_cont(_signum: int, _frame: FrameType | None) -> None:
        signal_groups(groups(), signal.SIGCONT)
        if around is not None:
            around.resume()

    try:
        old_tstp = signal.getsignal(signal.SIGTSTP)
        old_cont = signal.getsignal(signal.SIGCONT)
        if old_tstp != signal.SIG_IGN:
            signal.signal(signal.SIGTSTP, on_tstp)
        signal.signal(signal.SIGCONT, on_cont)
    except (ValueError, OSError):  # not the main thread
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTSTP, old_tstp)
        signal.signal(signal.SIGCONT, old_cont)
