"""``unsaved_run``: a report kept in memory (the library's ``gpudiag.explain`` and
``gpudiag.diff`` without a logdir: gpudiag.session.MemorySession) as the same typed ``Run``
that load_run gives for one on disk.

The report goes through what a written one goes through: report.json's strict JSON
(gpudiag.report.to_json_dict: non-finite numbers as null) and ``Report.from_dict``, so that
the records are those a reader of the run directory would get. Nothing is on disk: no
children, no traces, no live files; the step series are those the report itself holds
(`explain`'s profiled steps), none for another command.
"""

from __future__ import annotations

from pathlib import Path

from gpudiag import layout
from gpudiag.report import Report, to_json_dict
from gpudiag.rundir.load import run_status, typed_report
from gpudiag.rundir.loops import read_loops
from gpudiag.rundir.records import Loop, Run


def _report_loops(run: Run) -> dict[str, Loop]:
    return read_loops(run) if run.command == "explain" else {}


def unsaved_run(report: Report, about: Path) -> Run:
    """``report``, kept in memory, as a Run whose ``path`` is ``about`` (what the report is
    about: the traces explained, or a diff's run B) and whose ``report.run_dir`` is empty
    (no run directory holds it)."""
    data = to_json_dict(report)
    typed, evidence = typed_report(data, f"{about}: the report made in memory is malformed")
    return Run(path=about, command=typed.command, status=run_status(typed, {}),
               started_at=typed.started_at, finished_at=typed.finished_at,
               schema_version=layout.SCHEMA_VERSION, report=typed, report_json=data,
               children={}, traces=(), live=None, _loops=_report_loops,
               typed_evidence=evidence)
