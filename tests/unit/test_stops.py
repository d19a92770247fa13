"""gpudiag.procs.stops in this process: a stop request whose exception Python drops in a
callback is kept, its handlers set again, and raised once at the next check (issue 47).
The handlers and the hook are put back as they were after each test."""

from __future__ import annotations

import signal
import sys
import weakref
from collections.abc import Callable, Iterator

import pytest

from gpudiag.errors import Interrupted
from gpudiag.procs import stops


@pytest.fixture(autouse=True)
def installed() -> Iterator[None]:
    handlers = {s: signal.getsignal(s) for s in stops.HANDLED_SIGNALS}
    hook, ignored = sys.unraisablehook, stops.inherited_ignored
    stops.inherited_ignored = set()  # as where nothing is ignored by gpudiag's caller
    stops.install()
    try:
        yield
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        sys.unraisablehook, stops.inherited_ignored = hook, ignored
        stops.received.clear()
        stops.pending.clear()


class _Thing:
    pass


def _in_a_callback(action: Callable[[], None]) -> None:
    """``action`` run in a weakref callback, where Python drops what it raises."""
    thing = _Thing()
    ref = weakref.ref(thing, lambda _ref: action())
    del thing
    assert ref() is None


@pytest.mark.parametrize("sig", stops.HANDLED_SIGNALS)
def test_a_signal_handled_in_a_callback_is_raised_at_the_next_check(sig: int) -> None:
    _in_a_callback(lambda: signal.raise_signal(sig))  # the handler runs in the callback
    assert stops.pending == [sig] and stops.received == [sig]
    # not acted on: the handlers are gpudiag's again (a repeat is handled, a child started
    # now does not inherit SIG_IGN)
    assert all(signal.getsignal(s) is stops.on_signal for s in stops.HANDLED_SIGNALS)
    with pytest.raises(Interrupted) as raised:
        stops.check()
    assert raised.value.signum == sig
    assert all(signal.getsignal(s) == signal.SIG_IGN for s in stops.HANDLED_SIGNALS)
    stops.check()  # raised once: acted on now
    assert stops.first_received() == sig


def test_a_ctrl_c_dropped_in_a_callback_is_raised_as_one() -> None:
    def interrupt() -> None:
        raise KeyboardInterrupt

    _in_a_callback(interrupt)
    with pytest.raises(KeyboardInterrupt) as raised:
        stops.check()
    assert not isinstance(raised.value, Interrupted)


def test_a_signal_raised_plainly_after_a_dropped_one_is_the_same_request() -> None:
    _in_a_callback(lambda: signal.raise_signal(signal.SIGHUP))
    with pytest.raises(Interrupted):
        signal.raise_signal(signal.SIGTERM)  # `timeout`'s second delivery, acted on
    stops.check()  # the dropped SIGHUP is not raised again while that one is acted on
    assert stops.received == [signal.SIGHUP, signal.SIGTERM]


def test_other_unraisable_exceptions_go_to_the_hook_before(
        monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[BaseException | None] = []
    monkeypatch.setattr(stops, "_previous_hook", lambda u: seen.append(u.exc_value))

    def fail() -> None:
        raise ValueError("a bug in a callback")

    _in_a_callback(fail)
    assert [type(e) for e in seen] == [ValueError]
    assert stops.pending == []
    stops.check()


def test_a_request_while_deferred_is_kept_past_every_check_and_raised_at_resume() -> None:
    """`gpudiag run` defers from the program's start to its wait: a SIGTERM then is raised
    in the wait (passed on to the program), never in between; and an end that never reaches
    the wait lets the next check raise it."""
    stops.defer()
    try:
        signal.raise_signal(signal.SIGTERM)  # the handler runs: kept, not raised
        stops.check()  # a spawn's or a wait slice's check in between: still kept
        assert stops.pending == [signal.SIGTERM]
        with pytest.raises(Interrupted) as raised:
            stops.resume()
        assert raised.value.signum == signal.SIGTERM and stops.pending == []
    finally:
        stops.undefer()
    stops.install()
    stops.defer()
    signal.raise_signal(signal.SIGHUP)
    stops.undefer()  # set-up ended another way: the next check acts on it
    with pytest.raises(Interrupted):
        stops.check()
