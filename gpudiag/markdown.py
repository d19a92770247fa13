"""Markdown tables: report.md's findings table and the tables written as TensorBoard text.

TensorBoard's text plugin renders markdown, so both go through the same escaping: a ``|``
in a value is escaped and a newline folded to a space, keeping each row on one line.
"""

from __future__ import annotations

from typing import Any


def cell(value: Any) -> str:
    """One table cell: ``str(value)`` with ``|`` escaped and newlines folded."""
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_table(headers: list[str], rows: list[list[Any]]) -> str:
    """A markdown table of ``rows`` under ``headers``; every cell escaped."""
    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)
