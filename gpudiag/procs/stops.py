"""Stop requests: SIGTERM and SIGHUP handled as Ctrl-C is, and none of them lost.

``install`` (gpudiag.cli.main, first thing) sets ``on_signal`` for SIGTERM and SIGHUP:
what `timeout`, a CI cancel, systemd and a closed ssh session send. It notes the signal in
``received`` and raises errors.Interrupted wherever the main thread is, so that the paths
that stop children and write the partial report on Ctrl-C do so for them too. Both are
then ignored until the stop is done (a repeat, such as `timeout`'s second delivery to its
process group, changes nothing: the stop is bounded).

Python drops an exception raised inside a callback it cannot raise from: a weakref
callback (importlib's module locks have one, run on every import), a ``__del__``, the
garbage collector's callbacks. It prints "Exception ignored in ..." and goes on, and the
request would be lost, its handlers left ignoring every later one. So ``install`` also
sets ``sys.unraisablehook``: an interrupt that dies there is kept (``pending``), said on
no stream, and its handlers are set again. ``check`` raises it where gpudiag acts on it:
before every spawn and in each slice of every wait for a child (gpudiag.procs.group),
in the cluster's and TensorBoard's polling loops, and at the end of every command
(gpudiag.execute, gpudiag.cli.main). A Ctrl-C's KeyboardInterrupt dropped there is kept
the same way."""

from __future__ import annotations

import signal
import sys
import threading
from typing import Any

from gpudiag.errors import Interrupted, signum_of

#: Signals handled like Ctrl-C. Handled once; a repeat while stopping is ignored.
HANDLED_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

#: The handled signals that arrived (``on_signal``), first first: whatever exception comes
#: after one (an import it interrupted, click's Abort) is that signal's doing.
received: list[int] = []

#: Interrupts whose exception died in a callback, not yet raised again (``check``).
pending: list[int] = []

#: The handled signals gpudiag's caller had set to SIG_IGN (``nohup`` for SIGHUP): they
#: stay ignored, for gpudiag and for the programs it starts, as they would plainly.
inherited_ignored: set[int] | None = None

_previous_hook: Any = None
_in_hook = False  # inside _on_unraisable: an exception raised there would be dropped too
_deferred = False  # between ``defer`` and ``resume``: a request is kept, raised at resume


def install() -> None:
    """gpudiag's handlers for SIGTERM and SIGHUP (not for one its caller ignores), and the
    hook that keeps an interrupt a callback dropped. Called again (tests run several
    commands in one process): a new command, nothing received yet."""
    global inherited_ignored, _previous_hook
    if inherited_ignored is None:
        inherited_ignored = {int(s) for s in HANDLED_SIGNALS
                             if signal.getsignal(s) == signal.SIG_IGN}
    undefer()
    received.clear()
    pending.clear()
    if sys.unraisablehook is not _on_unraisable:
        _previous_hook = sys.unraisablehook
        sys.unraisablehook = _on_unraisable
    for sig in HANDLED_SIGNALS:
        if sig not in inherited_ignored:
            signal.signal(sig, on_signal)


def on_signal(signum: int, _frame: object) -> None:
    """The handler: both signals ignored from now on, this one noted and raised (kept
    instead while the hook runs, where it would be dropped too). While deferred it is
    kept and the handlers stay: a program started meanwhile must get the dispositions
    gpudiag's caller gave it, not SIG_IGN (it inherits an ignored signal across exec, and
    then ignored the very SIGTERM passed on to it)."""
    received.append(signum)
    if _deferred:
        pending.append(signum)
        return
    for sig in HANDLED_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    if _in_hook:
        pending.append(signum)
        return
    pending.clear()  # this one is raised now: an earlier dropped one is the same request
    raise Interrupted(signum)


def _on_unraisable(unraisable: Any) -> None:
    """``sys.unraisablehook``: an interrupt that died in a callback is kept for ``check``
    and its handlers are set again (it was not acted on: a repeat must be); anything else
    goes to the hook that was there before."""
    exc = getattr(unraisable, "exc_value", None)
    if not isinstance(exc, KeyboardInterrupt):
        (_previous_hook or sys.__unraisablehook__)(unraisable)
        return
    global _in_hook
    _in_hook = True
    try:
        pending.append(signum_of(exc))
        if isinstance(exc, Interrupted):  # on_signal's: it had set both to SIG_IGN
            for sig in HANDLED_SIGNALS:
                if sig not in (inherited_ignored or ()):
                    signal.signal(sig, on_signal)
    finally:
        _in_hook = False


def defer() -> None:
    """From here a stop request is kept, not raised, until ``resume`` (or ``undefer``):
    `gpudiag run` defers from just before it starts the program until its wait, so that a
    request that comes while it sets up its watch lands in the wait, where it is passed on
    to the program and its report says so (raised in between, it left no run.command)."""
    global _deferred
    _deferred = True


def undefer() -> None:
    """Stop keeping requests, raising none: one kept waits for the next ``check``."""
    global _deferred
    _deferred = False


def resume() -> None:
    """Stop keeping requests and raise the one kept, if any (``check``)."""
    undefer()
    check()


def check() -> None:
    """Raise the interrupt a callback dropped, if one did (Interrupted for SIGTERM and
    SIGHUP, as ``on_signal`` raises it; KeyboardInterrupt for Ctrl-C). In the main thread
    only: elsewhere it waits for the main thread's next check."""
    if _deferred or not pending or threading.current_thread() is not threading.main_thread():
        return
    signum = pending[0]
    pending.clear()
    if signum == signal.SIGINT:
        raise KeyboardInterrupt
    on_signal(signum, None)


def acted() -> None:
    """An interrupt was acted on (the command's partial report is written): one a callback
    dropped before it is the same request, not another."""
    pending.clear()


def first_received() -> int | None:
    """The first handled signal that arrived, if one did."""
    return received[0] if received else None
