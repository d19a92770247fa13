"""Append-only event recording inside the program: one JSONL file per process.

Each event is one JSON object on one line, written with one ``os.write`` on a file opened
with O_APPEND, the moment it is recorded: a program killed with SIGKILL or crashing in C++
keeps every event written before. A forked child (multiprocessing) gets its own file at its
first event (the pid is checked on every write).

Per-step records (:class:`StepBuffer`) are the one exception: the first
config.UNBUFFERED_FIRST_STEPS steps of a source are appended one by one, later ones are
gathered and appended every ``flush_interval_s`` (and at exit), so that timing a step costs
a few list appends, not a write. A flusher thread (:class:`Flusher`, one per process)
appends what a buffer holds once it is ``flush_interval_s`` old even when no further step
comes (a program that hangs, then is killed with SIGKILL, loses at most that last
interval of steps).

Per-site tables (:class:`SiteTable`: hostreads' and kerascalls' per line of the program)
are bounded (MAX_SITES; records past them only counted) and written whole at most every
flush interval as records come, and at exit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, Generic, TypeVar

from gpudiag.layout import events, loopevents, run_events_name


class Recorder:
    """Writes events for the current process under ``events_dir``."""

    def __init__(self, events_dir: str) -> None:
        self.events_dir = events_dir
        self._fd: int | None = None
        self._pid: int | None = None
        self._lock = threading.Lock()
        self.seq = 0
        self.closed = False  # for good (a watch() ended): nothing is written again

    def _descriptor(self) -> int:
        pid = os.getpid()
        if self._fd is None or self._pid != pid:
            Path(self.events_dir).mkdir(parents=True, exist_ok=True)
            path = Path(self.events_dir) / run_events_name(pid)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
            if fd <= 2:  # never in place of a standard stream the program closed
                fd, low = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3), fd
                os.close(low)
            self._fd = fd
            self._pid = pid
        return self._fd

    def close(self) -> None:
        """The events file closed for good: a later emit writes nothing (a hook the program
        kept past a notebook's watch() never writes into the finished run)."""
        with self._lock:
            self.closed = True
            if self._fd is not None and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd = None

    def emit(self, event: events.Event) -> None:
        """One line, as gpudiag.layout.events encodes it."""
        with self._lock:
            if self.closed:
                return
            self.seq += 1
            line = events.encode(event, t_unix_s=time.time(), pid=os.getpid(), seq=self.seq)
            data = (line + "\n").encode("utf-8", "replace")
            fd = self._descriptor()
            while data:
                written = os.write(fd, data)
                data = data[written:]


# Called with (buffer, its step count) for every step recorded (the placement window
# and the live status listen); each listener guards itself.
STEP_LISTENERS: list[Callable[[object, int], None]] = []


# Per step source: rows written one by one before aggregation (about 80 bytes each).
AGGREGATE_AFTER_ROWS = 20000


class Flusher:
    """One daemon thread per process: flushes every step buffer whose oldest unwritten row
    is ``interval_s`` old. It sleeps between rounds; nothing runs per step."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self.buffers: list[StepBuffer] = []
        self._pid = -1
        self._lock = threading.Lock()

    def register(self, buffer: StepBuffer) -> None:
        with self._lock:
            self.buffers.append(buffer)
            if self._pid != os.getpid():  # none yet, or a forked child: threads do not fork
                self._pid = os.getpid()
                threading.Thread(target=self._loop, name="gpudiag-flush", daemon=True).start()

    def _loop(self) -> None:
        pid = os.getpid()
        while self._pid == pid:
            time.sleep(self.interval_s / 10)
            with self._lock:
                buffers = list(self.buffers)
            for buffer in buffers:
                if buffer.retired:  # its source is gone: what is left, then no more
                    with self._lock:
                        self.buffers.remove(buffer)
                if buffer.rows and (buffer.retired or
                                    time.monotonic() - buffer._last_flush >= self.interval_s):
                    with contextlib.suppress(Exception):  # never into the program
                        buffer.flush()


_FLUSHERS: dict[float, Flusher] = {}


def stop_flushers() -> None:
    """Flush every step buffer and end the flusher threads (gpudiag.notebook's watch() at
    its end: the kernel goes on without gpudiag's threads)."""
    for flush in list(_FLUSHERS.values()):
        with flush._lock:
            buffers, flush.buffers = list(flush.buffers), []
            flush._pid = -1  # its loop ends at its next round
        for buffer in buffers:
            with contextlib.suppress(Exception):
                buffer.flush()
    _FLUSHERS.clear()


def flusher(interval_s: float) -> Flusher:
    if interval_s not in _FLUSHERS:
        _FLUSHERS[interval_s] = Flusher(interval_s)
    return _FLUSHERS[interval_s]


class StepBuffer:
    """Per-step rows of one step source, appended in batches as ``<kind>`` events (a
    gpudiag.layout.events step kind, whose other fields are ``fields``).

    ``add`` is what runs every step: a list append and a clock read. ``resolve`` turns a
    row's deferred values (e.g. a loss tensor) into plain numbers just before writing.

    Bounded on disk: after the first ``aggregate_after`` rows of a source, each flush
    writes one row for the steps it gathered (at most one a ``flush_interval_s``): the
    last step's row, with ``n`` (how many steps it stands for) and, for rows with a call
    time ``dt``, the median ``dt`` of those steps. An hour of a 1 ms step stays a few MB.
    """

    def __init__(self, emit: Callable[..., None], kind: str, flush_interval_s: float,
                 unbuffered_first: int, resolve: Callable[[dict[str, Any]], None] | None = None,
                 aggregate_after: int | None = None, **fields: Any) -> None:
        self.emit = emit
        self.kind = kind
        self.fields = fields
        self.flush_interval_s = flush_interval_s
        self.unbuffered_first = unbuffered_first
        self.resolve = resolve
        # what the placement window knows this loop by (None: the buffer itself)
        self.window_key: object = None
        self.rows: list[dict[str, Any]] = []
        self.count = 0
        self.aggregate_after = AGGREGATE_AFTER_ROWS if aggregate_after is None \
            else aggregate_after
        self.written = 0  # rows gathered so far (written one by one, or aggregated)
        self._last_flush = time.monotonic()
        self._lock = threading.Lock()
        self.retired = False
        flusher(flush_interval_s).register(self)

    def retire(self) -> None:
        """Its source is gone (a model collected): the flusher writes what is left and
        drops it. Only a flag: it may run inside the garbage collector, in any thread."""
        self.retired = True

    def add(self, row: dict[str, Any]) -> None:
        with self._lock:  # the flusher thread swaps the list under the same lock
            self.rows.append(row)
            self.count += 1
        for listener in STEP_LISTENERS:
            listener(self, self.count)
        if self.count <= self.unbuffered_first or \
                time.monotonic() - self._last_flush >= self.flush_interval_s:
            self.flush()

    def flush(self) -> None:
        with self._lock:
            rows, self.rows = self.rows, []
            self._last_flush = time.monotonic()
        if not rows:
            return
        rows = self._bounded(rows)
        if self.resolve is not None:
            for row in rows:
                try:
                    self.resolve(row)
                except Exception:
                    row.pop("loss", None)
        self.emit(loopevents.steps_event(self.kind, rows, self.fields))

    def _bounded(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        keep = max(0, self.aggregate_after - self.written)
        self.written += len(rows)
        if len(rows) <= keep + 1:
            return rows
        head, rest = rows[:keep], rows[keep:]
        last = dict(rest[-1])
        last["n"] = len(rest)
        durations = sorted(r["dt"] for r in rest if isinstance(r.get("dt"), float | int))
        if durations:
            last["dt"] = durations[len(durations) // 2]
        return [*head, last]


MAX_SITES = 64
MAX_CODES = 4096  # code objects whose "the program's own or not" is remembered
K = TypeVar("K", bound=Hashable)
S = TypeVar("S")


class SiteTable(Generic[K, S]):
    """One process's sites, by key; ``emit`` writes them (each subclass its event)."""

    def __init__(self, flush_interval_s: float) -> None:
        self.flush_interval_s = flush_interval_s
        self.sites: dict[K, S] = {}
        self.left_out = 0  # records at sites past MAX_SITES
        self.lock = threading.Lock()
        self.last_emit = time.monotonic()
        self.user_codes: dict[Any, bool] = {}  # code object -> the program's own

    def mine(self, code: Any) -> bool:  # the program's own (gpudiag.inprogram.usercode)
        known = self.user_codes.get(code)
        if known is None:
            from gpudiag.inprogram.usercode import is_user_file

            known = is_user_file(code.co_filename)
            if len(self.user_codes) < MAX_CODES:
                self.user_codes[code] = known
        return known

    def site(self, key: K, make: Callable[[], S]) -> S | None:
        """The site at ``key``, made the first time (None: the table is full, counted in
        ``left_out``). Called holding ``lock``."""
        site = self.sites.get(key)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                self.left_out += 1
                return None
            site = self.sites[key] = make()
        return site

    def emit_when_due(self) -> None:
        if time.monotonic() - self.last_emit >= self.flush_interval_s:
            self.emit()  # type: ignore[attr-defined]  # each subclass writes its own event
