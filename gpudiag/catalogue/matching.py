"""Matching lines against the catalogue's entries, fast enough for an hour of a program's
output: gpudiag.catalogue's ``match_lines`` and ``log_matcher`` build on it."""

from __future__ import annotations

import functools
import importlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.catalogue.entry import Entry


@dataclass(frozen=True)
class LogMatch:
    entry: Entry
    count: int
    first: str  # the first matching line, stripped


class LineMatcher:
    """``match_lines``, fed as the lines come (`run` follows the program's stderr while it
    runs, so that an hour of output is not matched after it ends).

    Most lines match nothing, and trying every entry's regex on each costs about 7 s for a
    million lines; so a line is first looked for every entry's required literal (the
    longest run of plain characters its pattern must contain, found by Python's own
    regex parser) in one regex of those literals, and only a line holding one is tried
    against the entries (1.6 s a million lines, the same matches)."""

    def __init__(self, entries: Sequence[Entry]) -> None:
        self.entries = list(entries)
        self.counts: dict[str, int] = {}
        self.first: dict[str, str] = {}
        self._worth = _literals_regex(tuple(e.pattern for e in self.entries))

    def feed(self, lines: Iterable[str]) -> None:
        worth, counts, first = self._worth.search, self.counts, self.first
        for line in lines:
            if worth(line) is None:
                continue
            for e in self.entries:
                if e.search(line):
                    counts[e.id] = counts.get(e.id, 0) + 1
                    first.setdefault(e.id, line.strip()[:500])

    def matches(self) -> list[LogMatch]:
        """In catalogue order, with counts and the first matching line."""
        return [LogMatch(e, self.counts[e.id], self.first[e.id]) for e in self.entries
                if e.id in self.counts]


def _required_literal(pattern: str) -> str:
    """The longest run of literal characters at the top level of ``pattern``: every match
    contains it. Empty (every line worth trying) where none is certain: a pattern that
    ignores case, an alternation at the top."""
    parser: Any = importlib.import_module("re._parser")  # Python's own (3.11+)
    parsed = parser.parse(pattern)
    if parsed.state.flags & re.IGNORECASE:
        return ""
    best = run = ""
    for op, arg in parsed:
        if op is importlib.import_module("re._constants").LITERAL:
            run += chr(arg)
        else:
            best, run = max(best, run, key=len), ""
    return max(best, run, key=len)


@functools.cache
def _literals_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    literals = sorted({_required_literal(p) for p in patterns}, key=len, reverse=True)
    return re.compile("|".join(re.escape(lit) for lit in literals))
