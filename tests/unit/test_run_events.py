"""The kinds gpudiag.run.events keeps as they are (its LATEST, NEWS and EACH tables): each
reaches the attribute of the process's state that the observation and the live view read."""

from __future__ import annotations

import dataclasses

import pytest

from gpudiag.layout import events as ev
from gpudiag.run import events
from gpudiag.run.runstate import ProcessState


def _two(kind: type[ev.Event]) -> tuple[ev.Event, ev.Event]:
    """Two events of ``kind``, told apart by identity (their fields are the defaults)."""
    return kind(), kind()


def _apply(state: ProcessState, event: ev.Event, seq: int) -> None:
    assert events.apply(state, ev.Recorded(pid=1, seq=seq, t_unix_s=100.0 + seq,
                                           event=event)) is None


@pytest.mark.parametrize("kind", [*events.LATEST, *events.NEWS])
def test_the_latest_event_of_a_kept_kind_stands(kind: type[ev.Event]) -> None:
    attr = {**events.LATEST, **events.NEWS}[kind]
    state = ProcessState(1)
    first, second = _two(kind)
    _apply(state, first, 1)
    _apply(state, second, 2)
    assert getattr(state, attr) is second
    news = [(t, e) for t, e in state.news if isinstance(e, kind)]
    if kind in events.NEWS:  # the live view says it, at its time
        assert [t for t, _ in news] == [101.0, 102.0]
        assert news[1][1] is second
    else:
        assert news == []


@pytest.mark.parametrize("kind", list(events.EACH))
def test_every_event_of_a_listed_kind_is_kept_in_order(kind: type[ev.Event]) -> None:
    state = ProcessState(1)
    first, second = _two(kind)
    _apply(state, first, 1)
    _apply(state, second, 2)
    kept = getattr(state, events.EACH[kind])
    assert len(kept) == 2 and kept[0] is first and kept[1] is second


def test_the_tables_name_attributes_the_state_declares() -> None:
    declared = {f.name for f in dataclasses.fields(ProcessState)}
    tables = {**events.LATEST, **events.NEWS, **events.EACH}
    # a misspelt name would be set on the state (setattr) and read by no one
    assert set(tables.values()) <= declared
