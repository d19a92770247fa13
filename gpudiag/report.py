"""Report records and their renderings: report.json (the contract), report.md, a rich table.

report.json follows gpudiag/report.schema.json (``schema_version`` = layout.SCHEMA_VERSION).
A finding is one check's outcome: an id, a status, one sentence, the evidence (plain
numbers and strings) behind it, and what to do when it is not ok.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from gpudiag import __version__
from gpudiag.errors import EXIT_CHECK_FAILED, EXIT_OK
from gpudiag.files import atomic_write_text, strict_json
from gpudiag.layout import REPORT_JSON, REPORT_MD, SCHEMA_VERSION
from gpudiag.markdown import markdown_table

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")


@dataclass(frozen=True)
class Finding:
    """One check's outcome. ``evidence`` holds JSON-able plain data only."""

    id: str
    status: Status
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"finding {self.id}: unknown status {self.status!r}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """A finding as report.json holds it (``to_dict``'s output) back; a ValueError or
        KeyError when a field is missing or of the wrong kind."""
        evidence = data.get("evidence") or {}
        if not isinstance(evidence, dict):
            raise ValueError(f"finding {data.get('id')!r}: evidence is not an object")
        return cls(id=str(data["id"]), status=data["status"], message=str(data["message"]),
                   evidence=evidence, advice=str(data.get("advice") or ""))


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Report:
    """Everything one command found. Mutable while the command runs; saved after each change."""

    command: str
    run_dir: str
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    partial: bool = True
    interrupted: bool = False
    environment: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    gpudiag_version: str = __version__  # of the gpudiag that wrote it

    def add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.status == s) for s in STATUSES}

    def exit_code(self) -> int:
        """0 when no check failed (warn and skip do not fail a run), else 1."""
        return EXIT_CHECK_FAILED if self.counts()["fail"] else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "gpudiag_version": self.gpudiag_version,
            "command": self.command,
            "argv": self.argv,
            "run_dir": self.run_dir,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "partial": self.partial,
            "interrupted": self.interrupted,
            "summary": self.counts(),
            "environment": self.environment,
            "devices": self.devices,
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """report.json's content (``to_dict``'s output) back: ``from_dict(d).to_dict() ==
        d`` for every report gpudiag writes (``summary`` is derived from the findings,
        ``schema_version`` is the reader's business: gpudiag.rundir). A ValueError,
        KeyError or TypeError when a field is missing or of the wrong kind."""
        findings = data.get("findings") or []
        if not isinstance(findings, list):
            raise ValueError("findings is not a list")
        return cls(command=str(data["command"]), run_dir=str(data.get("run_dir") or ""),
                   argv=list(data.get("argv") or []), started_at=str(data["started_at"]),
                   finished_at=data.get("finished_at"), partial=bool(data.get("partial")),
                   interrupted=bool(data.get("interrupted")),
                   environment=dict(data.get("environment") or {}),
                   devices=dict(data.get("devices") or {}),
                   findings=[Finding.from_dict(f) for f in findings],
                   data=dict(data.get("data") or {}),
                   gpudiag_version=str(data.get("gpudiag_version") or ""))


NON_FINITE_NOTE = ("JSON has no Infinity or NaN: these values were not finite and are "
                   "written as null")


def to_json_dict(report: Report) -> dict[str, Any]:
    """report.json's content: strict JSON, non-finite numbers as null and listed under
    ``data.non_finite`` with a note."""
    clean, replaced = strict_json(report.to_dict())
    if replaced:
        clean["data"]["non_finite"] = {"note": NON_FINITE_NOTE, "values": replaced}
    data: dict[str, Any] = clean
    return data


def to_json(report: Report) -> str:
    return json.dumps(to_json_dict(report), indent=2, allow_nan=False) + "\n"


def save(report: Report, run_dir: Path) -> None:
    """Write report.json and report.md; each replaced atomically, so a reader never sees
    half, and a full disk leaves the last complete version (WriteFailed, exit 3)."""
    atomic_write_text(run_dir / REPORT_JSON, to_json(report))
    atomic_write_text(run_dir / REPORT_MD, to_markdown(report))


_ICON = {"ok": "OK", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


def _evidence_md(evidence: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in evidence.items():
        text = json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
        if len(text) > 400:
            text = text[:400] + " ..."
        lines.append(f"  - `{key}`: {text}")
    return lines


def _headline(report: Report) -> list[str]:
    counts = report.counts()
    state = "complete"
    if report.partial:
        state = "interrupted, partial" if report.interrupted else "partial"
    out = [
        f"# gpudiag {report.command}",
        "",
        f"Run directory `{report.run_dir}`, started {report.started_at} ({state}).",
        "",
        ", ".join(f"{counts[s]} {s}" for s in STATUSES),
        "",
    ]
    if report.devices:
        out += [f"Devices: {report.devices.get('summary', '')}", ""]
    return out


def _sections(report: Report) -> list[str]:
    out: list[str] = []
    for f in report.findings:
        out += [f"## {_ICON[f.status]} `{f.id}`", "", f.message, ""]
        if f.advice and f.status != "ok":
            out += [f"What to do: {f.advice}", ""]
        if f.evidence:
            out += ["Evidence:", "", *_evidence_md(f.evidence), ""]
    return out


def to_markdown(report: Report) -> str:
    """The report for people: a findings table, then each finding with its evidence."""
    return "\n".join([
        *_headline(report),
        markdown_table(["status", "check", "finding"],
                       [[_ICON[f.status], f"`{f.id}`", f.message] for f in report.findings]),
        "", *_sections(report)])


#: The summary lists findings by severity: what failed first, what could not be checked
#: before what passed.
SUMMARY_ORDER: tuple[Status, ...] = ("fail", "warn", "skip", "ok")


def summary_markdown(report: Report) -> str:
    """The findings at a glance (TensorBoard's first text card): the counts, then one
    line per finding, failures first; no table, so nothing wraps into a narrow column."""
    counts = report.counts()
    state = "" if not report.partial else (
        " (interrupted: partial)" if report.interrupted else " (partial)")
    head = (f"**gpudiag {report.command}**{state}: "
            + ", ".join(f"{counts[s]} {s}" for s in STATUSES))
    if report.devices.get("summary"):
        head += f"; {report.devices['summary']}"
    lines = [f"- **{_ICON[f.status]}** `{f.id}`: {f.message}"
             for status in SUMMARY_ORDER for f in report.findings if f.status == status]
    return "\n".join([head, "", *lines, "",
                      f"Run directory `{report.run_dir}`. Evidence and advice for each "
                      "finding: the `gpudiag/report` text."])


def details_markdown(report: Report) -> str:
    """Each finding with its advice and evidence (the summary holds the one-line list)."""
    return "\n".join([*_headline(report), *_sections(report)])


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def render_table(report: Report, console: Any) -> None:
    """Print the findings as a rich table on ``console`` (a rich.console.Console)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=f"gpudiag {report.command}", show_lines=False)
    table.add_column("status")
    table.add_column("check")
    table.add_column("finding", overflow="fold")
    for f in report.findings:
        table.add_row(Text(_ICON[f.status], style=_STYLE[f.status]), Text(f.id), Text(f.message))
    console.print(table)
    counts = report.counts()
    console.print(", ".join(f"{counts[s]} {s}" for s in STATUSES))
