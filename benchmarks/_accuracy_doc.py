"""docs/accuracy.md as benchmarks/try_accuracy.py writes it: the table, the command, the
machine and its load, the scores, and what they do and do not show. The measurements are
kept beside it as JSON (``<doc>.json`` is not written: the doc holds them in a comment) so
the page can be written again from the same run (``--from-doc``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MARK = "<!-- measurements: "


def write_doc(path: Path, header: str, rows: list[str], summary: list[str],
              loads: list[str], meta: dict[str, Any], raw: list[dict[str, Any]]) -> None:
    start, end = meta["load_start"], meta["load_end"]
    text = f"""# How close gpudiag's predictions come, and does `gpudiag try` measure the fix?

Written by `PYTHONPATH=. python benchmarks/try_accuracy.py {meta['argv']}` (issue 45,
item 7), run {meta['started']} on this project's machine: {meta['cores']} cores, no GPU,
shared with other work (other sessions' tests and builds). Load average (1 minute) at the
start {start[0]:.2f}, at the end {end[0]:.2f}; per program, before and after its runs:
{', '.join(loads)}.

Each program (benchmarks/_accuracy_workload.py, written the way users write them) was
run twice over:

- **`gpudiag try`** on the program as written, `--fix` the one fix under test: a
  diagnosis, then rounds of the program as written and with the fix applied in-process
  at the user's line, interleaved. Its B/A is the geometric mean of each round's ratio of
  median steps, its interval from the rounds' spread (docs/try.md). The prediction is the
  diagnosis's, as B/A with its interval (`try.fix.<fix>`'s evidence, read through
  gpudiag's own reader).
- **The hand-fixed twin**, with no gpudiag: the program as written (A) and the same
  program with the fix typed in (B), alternating, each timing its own steps (the median
  after its first 10). Shown: A's median step, the spread of plain against plain (how far
  one A run strays from A's median: what B/A must clear to mean anything), and last B/A,
  the ratio of the medians, with the interval of the pairs' ratios (as try makes its own).

"Agree": try's B/A within 15 % of the twin's, or both intervals hold 1.00 (both "no
change"). The prediction's error is try's measured B/A over the predicted B/A, less 1.

{header}
{chr(10).join(rows)}

{chr(10).join(f'- {line}' for line in summary)}

{WHAT_IT_SHOWS}
{MARK}{json.dumps(raw)} -->
"""
    path.write_text(text)


def read_raw(path: Path) -> list[dict[str, Any]]:
    """The measurements a page written by write_doc holds."""
    text = path.read_text()
    start = text.index(MARK) + len(MARK)
    return list(json.loads(text[start:text.index(" -->", start)]))


WHAT_IT_SHOWS = """## What these numbers show, and what they do not

(Written after the run; see the table.)
"""
