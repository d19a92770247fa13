"""A run session: one command's run directory, its report, saved as it grows.

    with RunSession("placement", logdir) as session:
        session.add(finding)          # report.json/report.md rewritten at once
        session.text(TAG_PLACEMENT, markdown_table)   # TensorBoard text, at the end

report.json exists from the first moment (``partial: true``). On a normal end the
session marks it complete; on Ctrl-C (KeyboardInterrupt) or an unexpected error it marks
it interrupted and keeps every finding made so far, then lets the exception through. In
every case the report is also written to the ``report/`` TensorBoard run as markdown.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from gpudiag import report as report_mod
from gpudiag.layout import REPORT_TB_RUN, TAG_REPORT, new_run_dir
from gpudiag.report import Finding, Report


class RunSession:
    def __init__(self, command: str, logdir: Path) -> None:
        self.run_dir = new_run_dir(logdir, command)
        self.report = Report(command=command, run_dir=str(self.run_dir))
        self._texts: dict[str, str] = {}
        self.save()

    def save(self) -> None:
        report_mod.save(self.report, self.run_dir)

    def add(self, finding: Finding) -> Finding:
        self.report.add(finding)
        self.save()
        return finding

    def set(self, section: str, value: dict[str, Any]) -> None:
        """Set ``environment``, ``devices`` or a key of ``data`` and save."""
        if section in ("environment", "devices"):
            setattr(self.report, section, value)
        else:
            self.report.data[section] = value
        self.save()

    def text(self, tag: str, markdown: str) -> None:
        """A markdown text summary for the report's TensorBoard run (written at the end)."""
        self._texts[tag] = markdown

    def close(self, *, interrupted: bool) -> None:
        self.report.partial = interrupted
        self.report.interrupted = interrupted
        self.report.finished_at = datetime.now(UTC).isoformat(timespec="seconds")
        self.save()
        from gpudiag.tb import EventWriter

        with EventWriter(self.run_dir / REPORT_TB_RUN) as writer:
            writer.text(TAG_REPORT, report_mod.to_markdown(self.report))
            for tag, markdown in self._texts.items():
                writer.text(tag, markdown)

    def __enter__(self) -> RunSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(interrupted=exc_type is not None)
