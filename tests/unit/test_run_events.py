"""The kinds gpudiag.run.events keeps as they are (its LATEST, NEWS, FIRST and EACH tables):
each reaches the state's attribute the observation is made of, or the observation's own
field, which holds it as the agent wrote it."""

from __future__ import annotations

import dataclasses

import pytest

from gpudiag.layout import events as ev
from gpudiag.records.run import ProcessObservation
from gpudiag.run import events, observation
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
    assert _held(state, attr) is second
    news = [(t, e) for t, e in state.news if isinstance(e, kind)]
    if kind in events.NEWS:  # the live view says it, at its time
        assert [t for t, _ in news] == [101.0, 102.0]
        assert news[1][1] is second
    else:
        assert news == []


@pytest.mark.parametrize("kind", [*events.EACH, *events.FIRST])
def test_every_event_of_a_listed_kind_is_kept_in_order_or_the_first_stands(
        kind: type[ev.Event]) -> None:
    state = ProcessState(1)
    first, second = _two(kind)
    _apply(state, first, 1)
    _apply(state, second, 2)
    if kind in events.FIRST:
        assert _held(state, events.FIRST[kind]) is first
    else:
        kept = _held(state, events.EACH[kind])
        assert len(kept) == 2 and kept[0] is first and kept[1] is second


def _held(state: ProcessState, attr: str) -> object:
    """The state's attribute, or else what the observation made of it holds."""
    if attr in {f.name for f in dataclasses.fields(ProcessState)}:
        return getattr(state, attr)
    return getattr(observation.of(state, ""), attr)


def test_each_table_names_a_state_attribute_or_the_observations_field_of_its_kind() -> None:
    """A misspelt name would be held and read by no one; a name of the observation's must
    be a field typed as the event it holds (report.json writes it as it is)."""
    state = {f.name for f in dataclasses.fields(ProcessState)}
    observed = {f.name: str(f.type) for f in dataclasses.fields(ProcessObservation)}
    for table in (events.LATEST, events.NEWS, events.FIRST, events.EACH):
        for kind, attr in table.items():
            assert attr in state or kind.__name__ in observed.get(attr, ""), (kind, attr)
