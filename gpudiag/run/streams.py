"""The program's stdout and stderr: to the terminal as they come, saved whole.

Everything the program writes is saved to children/program/stdout.txt and stderr.txt.
What reaches the terminal is what the user would have seen without gpudiag:

- gpudiag's marker lines (layout.RUN_MARKER ...) never;
- TensorFlow's C++ log lines (``I0000 00:00:... file.cc:12] ...`` or the older
  ``2024-01-01 12:00:00.000000: I file.cc:12] ...``) only at or above the user's own
  TF_CPP_MIN_LOG_LEVEL (gpudiag runs the program at 0 to capture them all). Lines logged
  before absl's logging is initialised (TensorFlow's library loads: port.cc,
  cudart_stub.cc) are printed whatever the level, so they pass;
- the placement log (``Executing op ... in device ...`` and the placer's
  ``node: (Type): /job:...`` lines, which TensorFlow also prints on stdout) only after the
  program asked for it itself (marker ``placement-asked``);
- lines caused by gpudiag's own TensorFlow calls (between ``quiet-begin`` and
  ``quiet-end``, e.g. starting the profiler) never.

A line still being written (no newline yet: a progress bar) passes as soon as no more
comes for PARTIAL_FLUSH_S, so progress bars keep moving.
"""

from __future__ import annotations

import os
import re
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import BinaryIO

from gpudiag.layout import (
    RUN_MARK_HOOK_ERROR,
    RUN_MARK_PLACEMENT_ASKED,
    RUN_MARK_QUIET_BEGIN,
    RUN_MARK_QUIET_END,
    RUN_MARKER,
)

PARTIAL_FLUSH_S = 0.05
# After a read that ended on a whole line, wait this long before the next one, so a
# program writing many short lines (the placement log: a line per executed function)
# wakes gpudiag at most ~1/BATCH_S times a second instead of once per line. A pipe holds
# 64 KiB, so the program never blocks on it for this.
BATCH_S = 0.02
_CPP_LINE = re.compile(
    r"^(?:(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ (?P<file>[\w.\-]+):\d+\]"
    r"|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev2>[IWEF]) (?P<file2>[\w./\-]+):\d+\])")
_SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
_PLACEMENT_CPP = re.compile(r"(?:execute\.cc|placer\.cc):\d+\]")
_PLACEMENT_STDOUT = re.compile(r"^\S[^\n]*?: \([A-Za-z0-9_]+\): /job:\S+$")
_ABSL_PRE_INIT = "WARNING: All log messages before absl::InitializeLog() is called"
PRE_INIT_FILES = frozenset({"port.cc", "cudart_stub.cc"})
# A C++ message that goes on over a second line: (file, how the second line starts).
CONTINUATIONS = {"cpu_feature_guard.cc": "To enable the following instructions"}


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
    quiet: bool = False
    hook_errors: list[str] = field(default_factory=list)
    hidden_lines: int = 0
    _pre_init: bool = False
    _continue: str | None = None


def classify(line: str, state: FilterState, stream: str) -> bool:
    """Whether a complete line (without its newline) goes to the terminal; updates state."""
    if line.startswith(RUN_MARKER):
        word, _, rest = line[len(RUN_MARKER):].partition(" ")
        if word == RUN_MARK_PLACEMENT_ASKED:
            state.placement_asked = True
        elif word == RUN_MARK_QUIET_BEGIN:
            state.quiet = True
        elif word == RUN_MARK_QUIET_END:
            state.quiet = False
        elif word == RUN_MARK_HOOK_ERROR:
            state.hook_errors.append(rest)
        return False
    if stream == "stdout":
        return state.placement_asked or not _PLACEMENT_STDOUT.match(line)
    follows, state._continue = state._continue, None
    if follows is not None and line.startswith(follows):
        return False
    if line.startswith(_ABSL_PRE_INIT):
        state._pre_init = True
        return True
    m = _CPP_LINE.match(line)
    if m is None:
        state._pre_init = False
        return True
    source = m["file"] or (m["file2"] or "").rsplit("/", 1)[-1]
    pre_init, state._pre_init = state._pre_init and source in PRE_INIT_FILES, False
    if pre_init:
        state._pre_init = True
        return True
    show = (not state.quiet and _SEVERITY[m["sev"] or m["sev2"]] >= state.user_level
            and (state.placement_asked or not _PLACEMENT_CPP.search(line)))
    if not show:
        state._continue = CONTINUATIONS.get(source)
    return show


class LineFilter:
    """Bytes in, bytes for the terminal out; whole lines are classified, partial ones wait."""

    def __init__(self, state: FilterState, stream: str) -> None:
        self.state = state
        self.stream = stream
        self._pending = b""
        self._passing = False  # the current line's start already went out as a partial

    def feed(self, data: bytes) -> bytes:
        out = []
        data = self._pending + data
        *lines, self._pending = data.split(b"\n")
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


def pump(fd: int, save: BinaryIO, show: BinaryIO | None, line_filter: LineFilter,
         on_close: Callable[[], None] | None = None) -> threading.Thread:
    """A thread copying ``fd`` to ``save`` whole and, filtered, to ``show``."""

    def emit(data: bytes) -> None:
        if data and show is not None:
            try:
                show.write(data)
                show.flush()
            except (OSError, ValueError):
                pass

    def loop() -> None:
        try:
            while True:
                ready, _, _ = select.select([fd], [], [], PARTIAL_FLUSH_S)
                if not ready:  # output paused: the terminal and the saved file catch up
                    emit(line_filter.flush_partial())
                    save.flush()
                    continue
                try:
                    data = os.read(fd, 65536)
                except OSError:  # a pty reports EIO once the program has closed it
                    data = b""
                if not data:
                    break
                save.write(data)
                emit(line_filter.feed(data))
                if data.endswith(b"\n"):
                    time.sleep(BATCH_S)
            emit(line_filter.flush_partial())
        finally:
            save.flush()
            os.close(fd)
            if on_close is not None:
                on_close()

    thread = threading.Thread(target=loop, name=f"gpudiag-run-{line_filter.stream}",
                              daemon=True)
    thread.start()
    return thread
