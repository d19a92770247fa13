"""On-disk names of `gpudiag try` (gpudiag/commands/tryfixes.py); part of gpudiag.layout.

A try run directory (``<stamp>-try``) holds, beside its report.json, report.md and
report/, one `gpudiag run` directory per program run, each a whole run directory that
`gpudiag diff` reads::

    runs/diagnosis/                  the program as written, with its profiled window: the
                                     diagnosis that chose the fixes (absent with --from)
    runs/r1-as-written/              round 1's measured baseline (no profiled window)
    runs/r1-parallel-map/            round 1 with one fix applied in-process
    runs/r2-as-written/ ...

report.json's ``data.try`` is TRY_DATA's record (gpudiag.verdicts.trial.TryRecord).
"""

from __future__ import annotations

import re

TRY_RUNS_DIR = "runs"
TRY_DIAGNOSIS = "diagnosis"
TRY_AS_WRITTEN = "as-written"  # the trial without a fix (A)
TRY_DATA = "try"  # report.json's data.try


def trial_dir_name(round_no: int, fix: str) -> str:
    """``r2-parallel-map``: round ``round_no`` (from 1) of the trial of ``fix``
    (TRY_AS_WRITTEN: the baseline)."""
    safe = re.sub(r"[^a-z0-9]+", "-", fix.lower()).strip("-") or "fix"
    return f"r{round_no}-{safe}"
