"""The program's saved stderr matched against the catalogue as it is written (parent
side, no TensorFlow): gpudiag.run.live polls it while the program runs, so that an hour
of logging is not matched after the program ends (gpudiag.run.analyse finishes it)."""

from __future__ import annotations

from pathlib import Path

from gpudiag.catalogue import LineMatcher, log_matcher
from gpudiag.run.streams import MAX_LINE_BYTES, READ_BYTES


class StderrScan:
    """The program's saved stderr matched against the catalogue (catalogue.LineMatcher)
    as it is written: followed by offset, whole lines only; ``finish`` reads the rest once
    the program has ended. ``whole`` is False once a read failed part-way (the end then
    reads the file again from its start)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        self.matcher = log_matcher()
        self.whole = True
        self.skipping = False  # inside a line longer than MAX_LINE_BYTES

    def poll(self) -> None:
        """What was written since the last poll, read READ_BYTES at a time; of a line
        longer than MAX_LINE_BYTES only its start is matched (the rest is skipped), so the
        scan holds a bounded amount whatever the program writes."""
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                while data := f.read(READ_BYTES):
                    self.offset += len(data)
                    self._feed(data)
        except FileNotFoundError:
            return

    def _feed(self, data: bytes) -> None:
        if self.skipping:  # the rest of an over-long line
            end = data.find(b"\n")
            if end < 0:
                return
            self.skipping, data = False, data[end + 1:]
        data = self.pending + data
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        if len(self.pending) > MAX_LINE_BYTES:
            self.pending, self.skipping = self.pending[:MAX_LINE_BYTES], True
        if cut:
            self.matcher.feed(data[:cut].decode("utf-8", errors="replace").splitlines())
        if self.skipping:  # its start is matched now, as a line of its own
            self.matcher.feed([self.pending.decode("utf-8", errors="replace")])
            self.pending = b""

    def finish(self) -> LineMatcher:
        """Every line of the file matched, the last one too (with or without its newline)."""
        self.poll()
        if self.pending:
            self.matcher.feed(self.pending.decode("utf-8", errors="replace").splitlines())
            self.pending = b""
        return self.matcher


def read_bounded(path: Path) -> str:
    """The saved stderr as text, each line cut to its first MAX_LINE_BYTES (what the
    analysis matches): a program's megabytes without a newline are not held whole."""
    parts: list[bytes] = []
    skipping = False
    with path.open("rb") as f:
        pending = b""
        while data := f.read(READ_BYTES):
            if skipping:
                end = data.find(b"\n")
                if end < 0:
                    continue
                skipping, data = False, data[end:]
            data = pending + data
            cut = data.rfind(b"\n") + 1
            parts.append(data[:cut])
            pending = data[cut:]
            if len(pending) > MAX_LINE_BYTES:
                pending, skipping = pending[:MAX_LINE_BYTES], True
                parts.append(pending)
                pending = b""
        parts.append(pending)
    return b"".join(parts).decode("utf-8", errors="replace")
