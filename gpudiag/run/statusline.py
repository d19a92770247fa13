"""One status line at the bottom of the terminal while the program runs (parent side).

Drawn only when gpudiag's stderr is a terminal and ``--quiet`` was not given, on stderr
only: the program's bytes are never changed. The program's output and gpudiag's own lines
reach the terminal through :class:`Terminal`, which holds one lock over everything written
there: before a write it clears the status line (``\\r`` and erase-to-end-of-line), then
writes, and the status line is redrawn (at most every REDRAW_S) only where the cursor is at
the start of a line, so it never lands inside a line the program has not finished (a
progress bar) and never mixes with one. A stream that is not the terminal (stdout
redirected to a file) passes by untouched. The text is cut to the terminal's width, so
it never wraps (a wrapped line could not be cleared).

What the line says comes from gpudiag.run.live (``Live.status``): the last step seen,
its loss, examples/s (or steps/s where the batch size is unknown), each GPU's last NVML
utilization, e.g. ``[gpudiag] step 1200 | loss 0.0312 | 2048 examples/s | GPU0 91% GPU1 0%``.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from typing import BinaryIO

from gpudiag.run.every import Every

REDRAW_S = 1.0
PREFIX = "[gpudiag] "
CLEAR = b"\r\x1b[K"


class Terminal:
    def __init__(self, err: BinaryIO, text: Callable[[], str]) -> None:
        self.err = err
        self.text = text
        self._lock = threading.RLock()
        self._drawn = False
        self._at_line_start = True
        self._closed = False
        self._every = Every(REDRAW_S, self._redraw, "gpudiag-status")

    def start(self) -> Terminal:
        self._every.start()
        return self

    def close(self) -> None:
        """Erase the line; nothing is drawn again (the final report follows)."""
        self._every.stop(5)
        with self._lock:
            self._clear()
            self._closed = True

    def _redraw(self) -> None:
        with contextlib.suppress(Exception):  # a status line is never worth a failure
            self.draw()

    def _clear(self) -> None:
        if self._drawn:
            self._drawn = False
            with contextlib.suppress(OSError, ValueError):
                self.err.write(CLEAR)
                self.err.flush()

    def draw(self) -> None:
        with self._lock:
            if self._closed or not self._at_line_start:
                return
            text = self.text()
            if not text:
                return
            try:
                width = os.get_terminal_size(self.err.fileno()).columns
            except (OSError, ValueError):
                width = 80
            line = (PREFIX + text)[:max(width - 1, 0)]
            with contextlib.suppress(OSError, ValueError):
                self.err.write(b"\r" + line.encode("utf-8", "replace") + b"\x1b[K")
                self.err.flush()
                self._drawn = True

    def write(self, stream: BinaryIO, data: bytes) -> None:
        """The program's bytes to ``stream`` (the terminal), the status line out of the way."""
        with self._lock:
            self._clear()
            try:
                stream.write(data)
                stream.flush()
            finally:
                self._at_line_start = data.endswith(b"\n")

    def say(self, say: Callable[[str], None]) -> Callable[[str], None]:
        """gpudiag's own line-writer (a live finding), the status line out of the way."""
        def said(line: str) -> None:
            with self._lock:
                self._clear()
                say(line)
                self._at_line_start = True
        return said

    def through(self, stream: BinaryIO) -> Through:
        return Through(self, stream)


class Through:
    """What a pump writes the program's output to, on the terminal (streams.Shows)."""

    def __init__(self, terminal: Terminal, stream: BinaryIO) -> None:
        self.terminal, self.stream = terminal, stream

    def write(self, data: bytes) -> int:
        self.terminal.write(self.stream, data)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()
