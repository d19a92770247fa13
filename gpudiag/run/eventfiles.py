"""Read the program's events files (parent side, no TensorFlow): one file per process
(children/program/events-<pid>.jsonl), every line decoded by gpudiag.layout.eventdecode
(the only reader of the format), each event applied to its process's state by
gpudiag.run.events. A file whose last line was cut short (the process was killed while
writing it) loses only that line; a line that is not JSON, no event, or holds a field of
another shape (gpudiag.layout.eventdecode.check), is skipped, counted and named
(:class:`Unreadable`), and so is an event whose handler fails: one bad line costs that
line, never the run's report. gpudiag.run.live applies each poll's new lines
(:class:`Follower`), the end applies the whole files (:func:`observe_all`) and turns each
state into a ProcessObservation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from gpudiag.layout import RUN_EVENTS_PREFIX, RUN_EVENTS_SUFFIX, run_faults_name
from gpudiag.layout import eventdecode as evd
from gpudiag.layout import events as ev
from gpudiag.records import run as rec
from gpudiag.run import observation
from gpudiag.run.events import apply
from gpudiag.run.runstate import ProcessState


def _files(events_dir: Path) -> list[Path]:
    return sorted(events_dir.glob(f"{RUN_EVENTS_PREFIX}*{RUN_EVENTS_SUFFIX}"))


MAX_UNREADABLE_SAID = 5


@dataclass
class Unreadable:
    """The events lines that could not be read: how many, and the first few, each as
    ``events-<pid>.jsonl line <n>: <why>``; ``cut``: files whose last line was cut short
    (its process killed while writing it: the one line such a kill costs, not counted)."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    cut: int = 0
    newer: set[int] = field(default_factory=set)  # protocol versions above this gpudiag's

    def seen(self, recorded: ev.Recorded) -> None:
        if isinstance(recorded.event, ev.Unknown) and \
                recorded.event.version > ev.PROTOCOL_VERSION:
            self.newer.add(recorded.event.version)

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if len(self.first) < MAX_UNREADABLE_SAID:
            self.first.append(f"{where}: {reason}")




def read_events(events_dir: Path) -> tuple[dict[int, list[ev.Recorded]], Unreadable]:
    """{pid: events in order}, and the lines that could not be read. A file's last line
    without its newline (its process was killed while writing it) is left out, counted
    apart (``Unreadable.cut``)."""
    out: dict[int, list[ev.Recorded]] = {}
    bad = Unreadable()
    for path in _files(events_dir):
        try:
            data = path.read_bytes()
        except OSError as exc:
            bad.add(path.name, f"not readable ({exc.strerror})")
            continue
        *lines, last = data.split(b"\n")  # the last: empty, or a line cut short
        bad.cut += bool(last.strip())
        for n, line in enumerate(lines, 1):
            found = evd.check_line(line)
            if isinstance(found, evd.BadLine):
                bad.add(f"{path.name} line {n}", found.reason)
                continue
            bad.seen(found)
            out.setdefault(found.pid, []).append(found)
    for records in out.values():
        records.sort(key=lambda r: r.seq)
    return out, bad


@dataclass
class _Offset:
    offset: int = 0
    pending: bytes = b""


@dataclass
class Follower:
    """The events files read as they grow (only whole new lines), into one state per
    process (gpudiag.run.live: once a poll)."""

    events_dir: Path
    states: dict[int, ProcessState] = field(default_factory=dict)
    bad_lines: Unreadable = field(default_factory=Unreadable)
    _files: dict[Path, _Offset] = field(default_factory=dict)

    def poll(self) -> dict[int, ProcessState]:
        """Every process's state, with this poll's new steps and news."""
        for state in self.states.values():
            state.begin_poll()
        for path in _files(self.events_dir):
            follow = self._files.setdefault(path, _Offset())
            with path.open("rb") as f:
                f.seek(follow.offset)
                data = f.read()
            follow.offset += len(data)
            *lines, follow.pending = (follow.pending + data).split(b"\n")
            for line in lines:
                found = evd.check_line(line)
                if isinstance(found, evd.BadLine):
                    self.bad_lines.add(path.name, found.reason)
                    continue
                self.bad_lines.seen(found)
                state = self.states.setdefault(found.pid, ProcessState(found.pid))
                failed = apply(state, found)
                if failed is not None:
                    self.bad_lines.add(path.name, failed)
        return self.states


def observe(pid: int, records: list[ev.Recorded], events_dir: Path,
            bad: Unreadable | None = None) -> rec.ProcessObservation:
    """One process's events as a ProcessObservation (an event its handler could not take
    goes to ``bad``)."""
    state = ProcessState(pid)
    for recorded in records:
        failed = apply(state, recorded)
        if failed is not None and bad is not None:
            bad.add(f"{RUN_EVENTS_PREFIX}{pid}{RUN_EVENTS_SUFFIX} seq {recorded.seq}", failed)
    faults = events_dir / run_faults_name(pid)
    return observation.of(state, faults.read_text(errors="replace")
                          if faults.is_file() else "")


def observe_all(events_dir: Path) -> tuple[list[rec.ProcessObservation], Unreadable]:
    """Every process, in the order they started; and the lines that could not be read."""
    by_pid, bad = read_events(events_dir)
    order = sorted(by_pid, key=lambda pid: by_pid[pid][0].t_unix_s or 0.0)
    return [observe(pid, by_pid[pid], events_dir, bad) for pid in order], bad
