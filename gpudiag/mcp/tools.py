"""`gpudiag mcp`'s tools as plain functions over one logdir: their answers are JSON-able
dicts, their refusals gpudiag's one-line errors (RunDirError, UsageError), and nothing MCP
is imported here (gpudiag.mcp.server wraps each in a tool).

Read-only and confined: every path a caller names goes through
gpudiag.rundir.confine (``inside``: resolved, inside the logdir, a directory or a regular
file; ``check_tree``: nothing under it leads out of the logdir) before anything under it
is read; runs are read with the library (gpudiag.api), traces and diffs by the commands'
code (gpudiag.commands.explain ``explained``, gpudiag.commands.diff ``resolve`` and
``compared``) in memory, nothing written, not even into the logdir, and told to read
nothing outside it (``within``: a trace's recorded placement is looked up only in a run
wholly inside). No program is ever run.

A run's id is its run directory relative to the logdir (``run/2026-11-26T01-21-25-run``),
as the dashboard names it; every path served (a trace, a diff's sides, a run directory
named in a message) is written relative to the logdir too (``_served``), never as the
machine's absolute path. ``show_run`` answers with the verdict and the actions first and
each finding without its evidence; the whole evidence (and the step breakdown built from
it) only when asked (``evidence``). A `gpudiag try` run's answer comes first (``tried``,
gpudiag.verdicts.tried): its headline, each fix's measured B/A in words and its change at
the line; with ``evidence``, each fix's numbers too.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpudiag import api, layout
from gpudiag.commands import diff as diff_cmd
from gpudiag.commands import explain as explain_cmd
from gpudiag.errors import UsageError
from gpudiag.report import worst_first
from gpudiag.rundir import Run, RunDirError, StepBreakdown, scan_runs
from gpudiag.rundir.confine import confined_dir
from gpudiag.ui import Ui
from gpudiag.verdicts import headline
from gpudiag.verdicts.tried import tried


class Logdir:
    """The one logdir a server answers about (resolved once, when it starts)."""

    def __init__(self, logdir: Path) -> None:
        path = Path(logdir)
        if not path.is_dir():
            raise UsageError(f"--logdir {logdir}: not a directory")
        self.root = path.resolve()

    def id_of(self, path: Path) -> str:
        return str(path.relative_to(self.root)) if path.is_relative_to(self.root) else str(path)

    def confined(self, name: str, what: str) -> Path:
        """``name`` inside the logdir, with nothing under it leading out."""
        if not isinstance(name, str) or not name.strip():
            raise UsageError(f"{what}: give a path relative to the logdir")
        return confined_dir(self.root, name)

    def run(self, run_id: str) -> Run:
        """The run ``run_id`` names (a run directory inside the logdir)."""
        path = self.confined(run_id, "run")
        if not path.is_dir() or not (path / layout.REPORT_JSON).is_file():
            raise RunDirError(f"{run_id}: no such run in the logdir (list_runs names them)")
        return api.load_run(path)

    def side(self, name: str) -> Path:
        """A side of a diff: a run directory, or traces, inside the logdir."""
        return self.confined(name, "diff")


def list_runs(logdir: Logdir) -> dict[str, Any]:
    """Every run under the logdir, newest first, each with its verdict; the run
    directories refused (a symlink out of the logdir, a special file, an unreadable
    report) with why."""
    runs, bad = scan_runs(logdir.root)
    refused = [{"id": logdir.id_of(b.path), "why": b.reason} for b in bad]
    return {"logdir": str(logdir.root), "runs": [_summary(r, logdir) for r in runs],
            "refused": refused}


def show_run(logdir: Logdir, run_id: str, evidence: bool = False) -> dict[str, Any]:
    """One run: its verdict, the actions its findings advise (worst first), every finding
    without its evidence (id, status, title, question, message, advice, actions), its step
    series; with ``evidence``, every finding as report.json holds it and the per-device
    step breakdown of its bottleneck findings."""
    run = logdir.run(run_id)
    if evidence:
        return _answer(run, logdir, tried(run.report_json))
    findings = sorted(run.report_json.get("findings", []),
                      key=lambda f: worst_first(f.get("status")))
    actions = [{"finding": f["id"], "status": f.get("status"), **a} for f in findings
               if f.get("status") in ("fail", "warn") for a in f.get("actions") or []
               if isinstance(a, dict)]
    brief = [{k: v for k, v in f.items() if k != "evidence"}
             for f in run.report_json.get("findings", [])]
    summary = _summary(run, logdir)
    measured = tried(run.report_json)
    return _served({"verdict": summary.pop("verdict"),
                    **({"tried": _tried_brief(measured)} if measured else {}),
                    "actions": actions, **summary, "findings": brief, "loops": _loops(run)},
                   logdir)


#: What show_run gives of each fix a try run measured before the evidence is asked for.
_TRIED_BRIEF = ("fix", "label", "where", "verdict", "measured", "step", "predicted", "held",
                "as_written", "as_it_would_be", "change", "broke")


def _tried_brief(measured: dict[str, Any]) -> dict[str, Any]:
    """A try run's answer first: its headline, each fix's measured result in words and its
    change at the line, the fixes not tried (the numbers: with ``evidence``)."""
    return {"headline": measured["headline"],
            "fixes": [{k: f[k] for k in _TRIED_BRIEF} for f in measured["fixes"]],
            "not_tried": measured["not_tried"]}


def explain(logdir: Logdir, path: str) -> dict[str, Any]:
    """The traces at ``path`` (a .xplane.pb file, or a directory holding traces, inside
    the logdir) explained, in memory."""
    where = logdir.confined(path, "explain")
    run = explain_cmd.explained(where, None, Ui.quiet(), within=logdir.root,
                                argv=["gpudiag mcp: explain", path])
    return _answer(run, logdir)


def diff(logdir: Logdir, a: str, b: str) -> dict[str, Any]:
    """Run A (before) against run B (after), each a run id or traces inside the logdir,
    judged in memory."""
    quiet = Ui.quiet()
    run_a, run_b = (diff_cmd.resolve(logdir.side(side), None, quiet, within=logdir.root,
                                     argv=["gpudiag mcp: explain", side]) for side in (a, b))
    run = diff_cmd.compared(run_a, run_b, None, argv=["gpudiag mcp: diff", a, b])
    record = run.report_json.get("data", {}).get(layout.DIFF_DATA_KEY, {})
    return _served({**_answer(run, logdir), "id": None, "a": a, "b": b, "diff": record},
                   logdir)


def _summary(run: Run, logdir: Logdir) -> dict[str, Any]:
    return {"id": logdir.id_of(run.path), "command": run.command, "status": run.status,
            "started_at": run.started_at, "finished_at": run.finished_at,
            "summary": run.report.counts(),
            "verdict": headline.verdict(run.report_json, headline.UNCUT)}


def _loops(run: Run) -> list[dict[str, Any]]:
    return [{"name": name, "steps": len(loop.steps), "median_step_s": loop.median_step_s()}
            for name, loop in run.loops.items()]


def _answer(run: Run, logdir: Logdir, measured: dict[str, Any] | None = None
            ) -> dict[str, Any]:
    """The whole run: every finding with its evidence (a try run: ``tried`` whole first)."""
    return _served({**({"tried": measured} if measured else {}), **_summary(run, logdir),
                    "findings": run.report_json.get("findings", []),
                    "breakdown": [_breakdown(b) for b in run.breakdown],
                    "loops": _loops(run)}, logdir)


def _served(answer: Any, logdir: Logdir) -> Any:
    """``answer`` with every path inside the logdir written relative to it (a string that
    is the logdir itself: ``.``)."""
    root = str(logdir.root)
    if isinstance(answer, str):
        if answer == root:
            return "."
        return answer.replace(root + "/", "") if root + "/" in answer else answer
    if isinstance(answer, dict):
        return {k: _served(v, logdir) for k, v in answer.items()}
    if isinstance(answer, list):
        return [_served(v, logdir) for v in answer]
    return answer


def _breakdown(b: StepBreakdown) -> dict[str, Any]:
    """One bottleneck finding's step, flat as docs/mcp.md gives it: its id and status,
    then its typed evidence's fields (step_s, devices: each device's parts in seconds,
    causes, trace, predicted, ...)."""
    return {"finding_id": b.finding_id, "status": b.status, **dataclasses.asdict(b.evidence)}

