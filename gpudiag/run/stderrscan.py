"""The program's saved stderr matched against the catalogue as it is written (parent
side, no TensorFlow): gpudiag.run.live polls it while the program runs, so that an hour
of logging is not matched after the program ends (gpudiag.run.analyse finishes it)."""

from __future__ import annotations

from pathlib import Path

from gpudiag.catalogue import LineMatcher, log_matcher


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

    def poll(self) -> None:
        try:
            with self.path.open("rb") as f:
                f.seek(self.offset)
                data = f.read()
        except FileNotFoundError:
            return
        self.offset += len(data)
        data = self.pending + data
        cut = data.rfind(b"\n") + 1
        self.pending = data[cut:]
        if cut:
            self.matcher.feed(data[:cut].decode("utf-8", errors="replace").splitlines())

    def finish(self) -> LineMatcher:
        """Every line of the file matched, the last one too (with or without its newline)."""
        self.poll()
        if self.pending:
            self.matcher.feed(self.pending.decode("utf-8", errors="replace").splitlines())
            self.pending = b""
        return self.matcher
