"""The program's stdout and stderr: to the terminal as they come, saved whole.

Everything the program writes is saved to children/program/stdout.txt and stderr.txt.
What reaches the terminal is what the user would have seen without gpudiag:

- gpudiag's marker lines (layout.RUN_MARKER ...) never;
- TensorFlow's C++ log lines (``I0000 00:00:... file.cc:12] ...`` or the older
  ``2024-01-01 12:00:00.000000: I file.cc:12] ...``: a C++ source file, never a ``.py``
  one, so absl-py's Python log, which has the same layout, always passes) only at or
  above the program's TF_CPP_MIN_LOG_LEVEL: the user's, or the one the program set
  itself before importing TensorFlow (marker ``cpp-level``; gpudiag lends TensorFlow's
  import level 0 to capture them all, gpudiag.inprogram.cpplevel). Lines logged
  before absl's logging is initialised (TensorFlow's library loads: port.cc,
  cudart_stub.cc) are printed whatever the level, so they pass;
- the placement log (``Executing op ... in device ...`` and the placer's
  ``node: (Type): /job:...`` lines, which TensorFlow also prints on stdout) only after the
  program asked for it itself (marker ``placement-asked``), or, for one file's lines, when
  the program's own TF_CPP_VMODULE names it (``placement-asked placer``);
- lines caused by gpudiag's own TensorFlow calls (between ``quiet-begin`` and
  ``quiet-end``, e.g. starting the profiler) never.

A line still being written (no newline yet: a progress bar) passes as soon as no more
comes for PARTIAL_FLUSH_S, so progress bars keep moving, or as soon as it is longer than
MAX_LINE_BYTES (no marker or TensorFlow log line is that long): the filter never holds
more than that of a line, so output without newlines flows in time linear in its bytes.

The output flows at the program's own speed: the pump reads as soon as there is data and
never sleeps, and a chunk in which no line can be one of the above (no marker, no C++ log
prefix, no ``/job:``) passes whole without being split into lines (``might_hide``).
Saving is second to showing: when the saved file cannot be written (a full disk), the
pump stops saving, records why (``SaveFile.failure``), and goes on passing the output.
Nor does the saved copy take the program's last free space: it stops (``KeptFree``)
before the free space of its filesystem would fall under the reserve (``reserve_bytes``:
RESERVE_BYTES, the same on a 3 MiB disk as on a 3 TB one: a share of the filesystem left
a small disk's program too little for its checkpoint), so a program whose checkpoints
share the disk with ``runs/`` writes them as it would plainly; on a disk with less free
than that, nothing is saved, and that is said at once.
When where it shows is closed (``gpudiag run ... | head -2``), the pump closes the pipe, so
the program gets the broken pipe itself, as it would plainly.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import select
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Protocol

from gpudiag.layout import (
    RUN_MARK_CPP_LEVEL,
    RUN_MARK_HOOK_ERROR,
    RUN_MARK_PLACEMENT_ASKED,
    RUN_MARK_QUIET_BEGIN,
    RUN_MARK_QUIET_END,
    RUN_MARKER,
)
from gpudiag.run.cpplog import (
    ABSL_PRE_INIT,
    CONTINUATIONS,
    CPP_LINE,
    PLACEMENT_CPP,
    PLACEMENT_STDOUT,
    PRE_INIT_FILES,
    SEVERITY,
)

PARTIAL_FLUSH_S = 0.05
READ_BYTES = 1 << 20
MAX_LINE_BYTES = 64 << 10  # the most of one line the filter holds before passing it
# What in a chunk of bytes could make a line hidden or change the filter's state: a
# marker, a C++ log line's ``file:line]``, the pre-init warning, a placement line's /job:.
# Searched for one by one: one alternation is twenty times slower than three searches.
_MARKER_BYTES = RUN_MARKER.encode()
_CPP_FILE_LINE = re.compile(rb":\d+\]")
_PRE_INIT_BYTES = ABSL_PRE_INIT.encode()


def user_level(value: str | None) -> int:
    """TF_CPP_MIN_LOG_LEVEL as TensorFlow reads it (unset or invalid: 0)."""
    try:
        return max(0, min(3, int(value or "0")))
    except ValueError:
        return 0


@dataclass
class FilterState:
    """Shared by the stdout and stderr filters of one program."""

    user_level: int = 0
    placement_asked: bool = False
    vmodule: set[str] = field(default_factory=set)  # placement sources asked for by name
    quiet: bool = False
    hook_errors: list[str] = field(default_factory=list)
    hidden_lines: int = 0
    _pre_init: bool = False
    _continue: str | None = None


def classify(line: str, state: FilterState, stream: str) -> bool:
    """Whether a complete line (without its newline) goes to the terminal; updates state."""
    if line.startswith(RUN_MARKER):
        word, _, rest = line[len(RUN_MARKER):].partition(" ")
        if word == RUN_MARK_PLACEMENT_ASKED and rest:  # TF_CPP_VMODULE=placer=2: one file
            state.vmodule.add(rest.strip())
        elif word == RUN_MARK_PLACEMENT_ASKED:
            state.placement_asked = True
        elif word == RUN_MARK_QUIET_BEGIN:
            state.quiet = True
        elif word == RUN_MARK_QUIET_END:
            state.quiet = False
        elif word == RUN_MARK_CPP_LEVEL:  # the program's own, as it imports TensorFlow
            state.user_level = user_level(rest.strip() or None)
        elif word == RUN_MARK_HOOK_ERROR:
            state.hook_errors.append(rest)
        return False
    if stream == "stdout":
        return state.placement_asked or not PLACEMENT_STDOUT.match(line)
    follows, state._continue = state._continue, None
    if follows is not None and line.startswith(follows):
        return False
    if line.startswith(ABSL_PRE_INIT):
        state._pre_init = True
        return True
    m = CPP_LINE.match(line)
    if m is None:
        state._pre_init = False
        return True
    source = m["file"] or (m["file2"] or "").rsplit("/", 1)[-1]
    pre_init, state._pre_init = state._pre_init and source in PRE_INIT_FILES, False
    if pre_init:
        state._pre_init = True
        return True
    show = (not state.quiet and SEVERITY[m["sev"] or m["sev2"]] >= state.user_level
            and (state.placement_asked or not PLACEMENT_CPP.search(line)
                 or source.partition(".")[0] in state.vmodule))
    if not show:
        state._continue = CONTINUATIONS.get(source)
    return show


def might_hide(data: bytes, state: FilterState, stream: str) -> bool:
    """Whether some whole line of ``data`` may be hidden or change ``state`` (else every
    line passes as it is, and the only state they change is ``_pre_init``, to False)."""
    if state._continue is not None:
        return True
    if _MARKER_BYTES in data:
        return True
    if stream == "stdout":
        return not state.placement_asked and b"/job:" in data
    return _PRE_INIT_BYTES in data or _CPP_FILE_LINE.search(data) is not None


class LineFilter:
    """Bytes in, bytes for the terminal out; whole lines are classified, partial ones wait."""

    def __init__(self, state: FilterState, stream: str) -> None:
        self.state = state
        self.stream = stream
        self._pending = b""
        self._passing = False  # the current line's start already went out as a partial

    def feed(self, data: bytes) -> bytes:
        data = self._pending + data
        cut = data.rfind(b"\n") + 1
        if cut and not might_hide(data[:cut], self.state, self.stream):
            self._pending = data[cut:]
            self._passing = False
            self.state._pre_init = False
            return data[:cut]
        *lines, pending = data.split(b"\n")
        shown = self._classified(lines)
        if len(pending) > MAX_LINE_BYTES:  # a line this long is the program's own: it passes
            self._pending = b""
            self._passing = True
            return shown + pending
        self._pending = pending
        return shown

    def _classified(self, lines: list[bytes]) -> bytes:
        out = []
        for raw in lines:
            if self._passing:
                out.append(raw + b"\n")
                self._passing = False
                continue
            text = raw.decode("utf-8", "replace").rstrip("\r")
            if classify(text, self.state, self.stream):
                out.append(raw + b"\n")
            else:
                self.state.hidden_lines += 1
        return b"".join(out)

    def flush_partial(self) -> bytes:
        """The line being written, passed as it is (called when output pauses, and at EOF)."""
        data, self._pending = self._pending, b""
        if data:
            self._passing = True
        return data


RESERVE_BYTES = 1 << 30
RECHECK_BYTES = 1 << 20  # the free space is asked again after this much was saved


def reserve_bytes(total_bytes: int) -> int:
    """The free space the saved output leaves to the program on a filesystem this big: the
    same on every filesystem (10 % of a 3 MiB disk was 300 KiB, and the program's 1 MiB
    checkpoint then failed under gpudiag, not plainly)."""
    del total_bytes  # the program's need does not shrink with its disk
    return RESERVE_BYTES


def disk_space(path: Path) -> tuple[int, int]:
    """(free bytes an unprivileged writer may use, the filesystem's size) (``df``)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize, st.f_blocks * st.f_frsize


class KeptFree(OSError):
    """The saved copy stopped at the reserve: the space left is the program's."""

    def __init__(self, free_bytes: int, reserve: int, saved_bytes: int) -> None:
        super().__init__(errno.ENOSPC, (
            f"stopped after {saved_bytes / 1e6:.1f} MB with {free_bytes / 1e6:.1f} MB free "
            f"on its filesystem, to keep {reserve / 1e6:.1f} MB for the program (gpudiag's "
            f"reserve: the last {RESERVE_BYTES >> 30} GiB of any filesystem)"))
        self.free_bytes, self.reserve, self.saved_bytes = free_bytes, reserve, saved_bytes


class SaveFile:
    """The file a stream is saved to; the first write that fails (a full disk), or would
    take the filesystem's free space under the reserve (``KeptFree``), stops the saving
    for good and is kept in ``failure`` (the output still reaches the terminal).
    ``space`` is ``disk_space`` (a test gives its own)."""

    def __init__(self, handle: BinaryIO, path: Path,
                 on_fail: Callable[[SaveFile], None] | None = None,
                 space: Callable[[Path], tuple[int, int]] = disk_space) -> None:
        self.handle = handle
        self.path = path
        self.failure: OSError | None = None
        self._on_fail = on_fail
        self._space = space
        self._allowance = -1  # bytes that may still be saved before asking again
        self._since_check = 0
        self.saved_bytes = 0

    def _room_for(self, size: int) -> bool:
        """Whether ``size`` more bytes leave the reserve free (asks the filesystem every
        RECHECK_BYTES, and whenever the last answer's room is used up)."""
        if size <= self._allowance and self._since_check + size < RECHECK_BYTES:
            self._allowance -= size
            self._since_check += size
            return True
        try:
            free, total = self._space(self.path.parent)
        except OSError:
            return True  # not known: the write itself decides
        reserve = reserve_bytes(total)
        self._allowance, self._since_check = free - reserve - size, size
        if self._allowance >= 0:
            return True
        self._failed(KeptFree(free, reserve, self.saved_bytes))
        return False

    def _failed(self, exc: OSError) -> None:
        self.failure = exc
        with contextlib.suppress(OSError):
            self.handle.close()
        if self._on_fail is not None:
            self._on_fail(self)

    def write(self, data: bytes) -> None:
        if self.failure is None and self._room_for(len(data)):
            try:
                self.handle.write(data)
                self.saved_bytes += len(data)
            except OSError as exc:
                self._failed(exc)
            except ValueError:  # closed by its owner: nothing more to save
                pass

    def flush(self) -> None:
        if self.failure is None:
            try:
                self.handle.flush()
            except OSError as exc:
                self._failed(exc)
            except ValueError:
                pass


def grow_pipe(fd: int) -> None:
    """Let the pipe hold up to 1 MiB (Linux; elsewhere, or when refused, it stays 64 KiB),
    so a program writing in bursts rarely waits for the pump."""
    with contextlib.suppress(OSError, AttributeError):
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, READ_BYTES)


class Shows(Protocol):
    """Where a pump shows the output: a binary stream, or gpudiag.run.statusline.Through."""

    def write(self, data: bytes, /) -> object: ...

    def flush(self) -> object: ...


class Pump(threading.Thread):
    """Copies ``fd`` to ``save`` whole and, filtered, to ``show``, until end-of-file or,
    once ``program_ended`` is called, until the pipe is quiet for PARTIAL_FLUSH_S (a
    descendant that outlives the program may hold it open for ever) or ``stop_now`` is
    called. ``eof`` says which; without end-of-file, ``fd`` is left open for the caller
    (gpudiag.run.survivors hands it on), else it is closed. ``done`` is set once it has
    finished."""

    def __init__(self, fd: int, save: SaveFile | BinaryIO, show: Shows | None,
                 line_filter: LineFilter, on_close: Callable[[], None] | None = None) -> None:
        super().__init__(name=f"gpudiag-run-{line_filter.stream}", daemon=True)
        self.fd, self.save, self.show, self.line_filter = fd, save, show, line_filter
        self.on_close = on_close
        self.eof = False
        self.broken = False  # where it showed is closed: the program gets the broken pipe
        self._ended = False
        self._stopping = False
        # set as run() returns. Not Thread.join/is_alive: a join that a signal interrupts
        # (Python before 3.13) can mark the thread stopped while it still runs, and the
        # pipe it is about to close would be handed over, then closed twice
        self.done = threading.Event()
        self.handed_over = False  # gpudiag.run.survivors gave its pipe to a forwarder
        self.forwarder: int | None = None  # that forwarder's pid

    def program_ended(self) -> None:
        self._ended = True

    def stop_now(self) -> None:
        """Stop after the chunk being copied (a descendant holds the pipe and talks on)."""
        self._stopping = True

    def _emit(self, data: bytes) -> None:
        if data and self.show is not None:
            try:
                self.show.write(data)
                self.show.flush()
            except BrokenPipeError:  # `gpudiag run ... | head`: head has gone
                self.show = None
                self.broken = True
            except (OSError, ValueError):
                pass

    def run(self) -> None:
        try:
            while True:
                ready, _, _ = select.select([self.fd], [], [], PARTIAL_FLUSH_S)
                if not ready:  # output paused: the terminal and the saved file catch up
                    self._emit(self.line_filter.flush_partial())
                    self.save.flush()
                    if self._ended:  # quiet, yet open: held by a descendant
                        break
                    continue
                try:
                    data = os.read(self.fd, READ_BYTES)
                except OSError:  # a pty reports EIO once the program has closed it
                    data = b""
                if not data:
                    self.eof = True
                    break
                self.save.write(data)
                self._emit(self.line_filter.feed(data))
                if self.broken:  # as plainly: the program's next write fails (EPIPE)
                    self.eof = True
                    break
                if self._stopping:
                    break
            self._emit(self.line_filter.flush_partial())
        finally:
            try:
                self.save.flush()
                if self.eof:
                    os.close(self.fd)
                if self.on_close is not None:
                    self.on_close()
            finally:
                self.done.set()


def pump(fd: int, save: SaveFile | BinaryIO, show: Shows | None, line_filter: LineFilter,
         on_close: Callable[[], None] | None = None) -> Pump:
    """A started Pump (see there)."""
    thread = Pump(fd, save, show, line_filter, on_close)
    thread.start()
    return thread
