"""The program's lines as the fixes read and rewrite them: a recorded call at ``file:line``
and its text with an argument added or a call appended. Pure, the standard library only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Call:
    """One call the program made at its own line, as the diagnosis's hooks recorded it:
    ``method`` (map, batch, compile ...), ``file`` (its base name), ``line``, ``code``
    (the line's text), its arguments, and for tf.data the tags of the datasets it took and
    made."""

    method: str
    file: str
    line: int
    code: str = ""
    args: Mapping[str, Any] | None = None
    input: int | None = None  # the dataset it was called on (tf.data's calls' tags)
    output: int | None = None  # the dataset it made

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def calls_at(calls: Sequence[Call], where: str | None, method: str | None = None
             ) -> list[Call]:
    """The recorded calls at ``file:line`` (of ``method``), in the order they were made."""
    return [c for c in calls if c.where == where and (method is None or c.method == method)]


def add_argument(code: str, method: str, argument: str) -> str | None:
    """``code`` with ``argument`` added to its call of ``method`` (``.map(f)`` ->
    ``.map(f, num_parallel_calls=...)``); None where the call does not close on this line."""
    span = call_span(code, method)
    if span is None:
        return None
    open_at, close_at = span
    inside = code[open_at + 1:close_at].strip()
    sep = ", " if inside else ""
    return f"{code[:close_at].rstrip()}{sep}{argument}{code[close_at:]}"


def call_span(code: str, method: str) -> tuple[int, int] | None:
    """The positions of the parentheses of ``code``'s last call of ``method`` (``.method(``
    or ``method(`` at a word's start), when the call closes on the line; None otherwise."""
    start = -1
    for token in (f".{method}(", f"{method}("):
        at = code.rfind(token)
        if at >= 0 and (token[0] == "." or at == 0 or not (code[at - 1].isalnum()
                                                           or code[at - 1] in "_.")):
            start = at + len(token) - 1
            break
    if start < 0:
        return None
    depth = 0
    for i in range(start, len(code)):
        depth += {"(": 1, ")": -1}.get(code[i], 0)
        if depth == 0:
            return start, i
    return None


def at_line(calls: Sequence[Call], file: str, line: int, method: str) -> list[Call]:
    return [c for c in calls if c.file == file and c.line == line and c.method == method]
