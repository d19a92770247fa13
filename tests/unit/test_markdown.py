"""Markdown tables (report.md, TensorBoard text): one row per line, pipes escaped."""

from __future__ import annotations

from gpudiag.markdown import cell, markdown_table


def test_table_escapes_pipes_and_folds_newlines() -> None:
    table = markdown_table(["a", "b|c"], [["x|y", "two\nlines"], [1, None]])
    assert table.splitlines() == [
        "| a | b\\|c |",
        "|---|---|",
        "| x\\|y | two lines |",
        "| 1 | None |",
    ]
    assert cell("p|q\nr") == "p\\|q r"
