"""One catalogue entry: a message's exact text (a regular expression), what it means and
what to do (the catalogue package's docstring says where each example came from)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Severity = Literal["info", "warn", "fail"]
Kind = Literal["log", "crash"]


@dataclass(frozen=True)
class Entry:
    id: str
    kind: Kind  # "log": a line TensorFlow writes; "crash": an exception's "Type: message"
    topic: str  # gpu-libraries | distribute | placement | config | data | memory | function
    severity: Severity
    pattern: str  # a regular expression searched in the line (or "Type: message")
    meaning: str
    fix: str
    example: str
    source: str

    def search(self, text: str) -> re.Match[str] | None:
        return _compiled(self.pattern).search(text)


_CACHE: dict[str, re.Pattern[str]] = {}


def _compiled(pattern: str) -> re.Pattern[str]:
    if pattern not in _CACHE:
        _CACHE[pattern] = re.compile(pattern)
    return _CACHE[pattern]
