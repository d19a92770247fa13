"""The report for people: report.md (the verdict every face shows, then a findings
table, then each finding with its title, message, actions and evidence) and the report's
TensorBoard text cards; and the run directory's report files, written together (save).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag.files import atomic_write_text
from gpudiag.layout import REPORT_JSON, REPORT_MD
from gpudiag.markdown import markdown_table
from gpudiag.report import ICON, STATUSES, SUMMARY_ORDER, Action, Report, to_json


def save(report: Report, run_dir: Path, verdict: Sequence[Sequence[str]] = ()) -> None:
    """Write report.json and report.md (``verdict``: its first section, to_markdown); each
    replaced atomically, so a reader never sees half, and a full disk leaves the last
    complete version (WriteFailed, exit 3)."""
    atomic_write_text(run_dir / REPORT_JSON, to_json(report))
    atomic_write_text(run_dir / REPORT_MD, to_markdown(report, verdict))


#: The longest evidence value report.md writes out; a longer one is named, whole, and
#: left to report.json (never cut mid-value).
EVIDENCE_MD_CHARS = 400


def _evidence_md(evidence: dict[str, Any]) -> list[str]:
    lines = []
    for key, value in evidence.items():
        text = json.dumps(value, default=str) if isinstance(value, dict | list) else str(value)
        if len(text) > EVIDENCE_MD_CHARS:
            text = f"({_too_long(value, text)}: whole in report.json)"
        lines.append(f"  - `{key}`: {text}")
    return lines


def _too_long(value: Any, text: str) -> str:
    """What a value too long for report.md is, in words that are themselves whole."""
    if isinstance(value, dict):
        keys = ", ".join(f"`{k}`" for k in value)
        entries = f"{len(value):,} entries"
        return f"{entries}: {keys}" if len(keys) <= EVIDENCE_MD_CHARS else entries
    if isinstance(value, list):
        return f"a list of {len(value):,} items"
    return f"{len(text):,} characters"


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


def _action_md(a: Action) -> str:
    """One action in report.md: where, what, and the step predicted after it (or why
    there is no prediction)."""
    text = (f"at `{a.where}`: " if a.where else "") + a.what
    p = a.predicted
    said = p.said() if p is not None else ""
    if said:
        text += f"; {said}"
    if p is not None and p.step_s is not None and p.basis:
        text += f" ({p.basis})"
    return text


def _sections(report: Report) -> list[str]:
    out: list[str] = []
    for f in report.findings:
        out += [f"## {ICON[f.status]} `{f.id}`", ""]
        if f.title:
            out += [f"**{f.title}**", ""]
        out += [f.message, ""]
        if f.actions:
            out += ["What to change:", "", *(f"- {_action_md(a)}" for a in f.actions), ""]
        if f.advice and f.status != "ok":
            out += [f"What to do: {f.advice}", ""]
        if f.evidence:
            out += ["Evidence:", "", *_evidence_md(f.evidence), ""]
    return out


def _verdict_md(verdict: Sequence[Sequence[str]]) -> list[str]:
    """The verdict's entries (gpudiag.verdicts.headline's, as the terminal ends with them),
    one item each, its sub-entries (the fix) under it; markdown's marks written as text."""
    if not verdict:
        return []
    out = ["## Verdict", ""]
    for entry in verdict:
        out += [f"{'  ' if n else ''}- {md_text(' '.join(part.split()))}"
                for n, part in enumerate(entry)]
    return [*out, ""]


def md_text(text: str) -> str:
    """``text`` as markdown shows it, not as markup: its marks escaped (``>`` only opens a
    quote at a line's start, which an entry never is: "25.0 -> 8.02" stays as it reads)."""
    return re.sub(r"([*_`\[\]<])", r"\\\1", text)


def to_markdown(report: Report, verdict: Sequence[Sequence[str]] = ()) -> str:
    """The report for people: the verdict first (``verdict``: the entries every face
    shows), a findings table, then each finding with its evidence."""
    return "\n".join([
        *_headline(report), *_verdict_md(verdict),
        markdown_table(["status", "check", "finding"],
                       [[ICON[f.status], f"`{f.id}`", f.message] for f in report.findings]),
        "", *_sections(report)])


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
    lines = [f"- **{ICON[f.status]}** `{f.id}`: {f.headline}"
             for status in SUMMARY_ORDER for f in report.findings if f.status == status]
    return "\n".join([head, "", *lines, "",
                      f"Run directory `{report.run_dir}`. Evidence and advice for each "
                      "finding: the `gpudiag/report` text."])


def details_markdown(report: Report) -> str:
    """Each finding with its advice and evidence (the summary holds the one-line list)."""
    return "\n".join([*_headline(report), *_sections(report)])
