"""A run session: one command's run directory, its report, saved as it grows.

    with RunSession("placement", logdir) as session:
        session.add(finding)          # report.json/report.md rewritten at once
        session.text(TAG_PLACEMENT, markdown_table)   # TensorBoard text, at the end

report.json exists from the first moment (``partial: true``). On a normal end the
session marks it complete; on Ctrl-C, SIGTERM or SIGHUP (KeyboardInterrupt) or an
unexpected error it marks it interrupted and keeps every finding made so far, then lets
the exception through. In every case the report is also written to the ``report/``
TensorBoard run as markdown: the short verdict (TAG_VERDICT, gpudiag.verdicts.headline: the Text
tab's first card), the findings at a glance (TAG_FINDINGS) and each finding's evidence
(TAG_REPORT); with a bottleneck finding (run, explain, scaling), those findings before
them (TAG_BOTTLENECK) and their breakdown as a stacked bar chart in the Images tab
(TAG_BREAKDOWN_PLOT, gpudiag.tb.breakdown).

A write that fails (a full disk) raises WriteFailed; report.json then keeps its last
complete version. While another exception is already on its way out, a failing write at
close does not replace it: the first cause is the one the user sees.

``forward_exit`` records the exit code of a command gpudiag ran for the user (`monitor`,
`run`): the CLI exits with it whatever else happens afterwards, a failing write included.

``MemorySession`` is a session that writes nothing: the library's ``gpudiag.explain`` and
``gpudiag.diff`` called without a logdir (gpudiag.api) keep the report in memory.
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any

from gpudiag import reportmd
from gpudiag.errors import GpudiagError, WriteFailed, signum_of
from gpudiag.layout import (
    BREAKDOWN_PNG,
    REPORT_TB_RUN,
    TAG_BOTTLENECK,
    TAG_BREAKDOWN_PLOT,
    TAG_FINDINGS,
    TAG_REPORT,
    TAG_VERDICT,
    new_run_dir,
)
from gpudiag.report import Finding, Report
from gpudiag.verdicts import headline
from gpudiag.verdicts.common import title


class RunSession:
    def __init__(self, command: str, logdir: Path, *, argv: list[str] | None = None) -> None:
        """``argv``: what report.json records as the command (default: this process's
        command line; the library gives the call it was made with)."""
        self._begin(command, new_run_dir(logdir, command), saved=True, argv=argv)
        try:
            self.save()
        except KeyboardInterrupt as exc:  # a signal in the first moment: still a report
            self.__exit__(type(exc), exc, exc.__traceback__)
            raise

    @classmethod
    def at(cls, command: str, run_dir: Path) -> RunSession:
        """A session in the run directory ``run_dir``, a name of the contract's inside
        another run's (`gpudiag try`'s trials), created here; never one that exists."""
        try:
            run_dir.mkdir(parents=True)
        except OSError as exc:
            raise WriteFailed.of(exc, run_dir) from exc
        session = cls.__new__(cls)
        session._begin(command, run_dir, saved=True, argv=None)
        session.save()
        return session

    def _begin(self, command: str, run_dir: Path, *, saved: bool,
               argv: list[str] | None) -> None:
        self.run_dir = run_dir
        self.report = Report(command=command, run_dir=str(run_dir) if saved else "")
        if argv is not None:
            self.report.argv = list(argv)
        self._texts: dict[str, str] = {}
        self.forwarded_exit: int | None = None
        self._held = 0  # inside batch(): saved once, when the outermost batch ends

    def forward_exit(self, code: int) -> None:
        """The exit code gpudiag must end with: the watched command's own."""
        self.forwarded_exit = code

    def save(self) -> None:
        if not self._held:
            reportmd.save(self.report, self.run_dir)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Findings and data added inside are saved once, when it ends: an analysis that
        makes its findings at once rewrites report.json once, not at each of them (a run's
        end made 28). Ended by an exception, it saves nothing: the session's close does."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        self.save()

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

    def close(self, *, interrupted: bool, signal_name: str | None = None,
              complete: bool | None = None) -> None:
        """Finish the report: complete unless ``complete`` says otherwise (default: complete
        when not interrupted)."""
        self._finish(interrupted=interrupted, signal_name=signal_name, complete=complete)
        self.save()  # whole first: the verdict is made from it, and can cost only itself
        reportmd.save(self.report, self.run_dir, headline.entries(self.report.to_dict()))
        from gpudiag.tb import breakdown
        from gpudiag.tb.writer import EventWriter

        try:
            with EventWriter(self.run_dir / REPORT_TB_RUN) as writer:
                writer.text(TAG_VERDICT, headline.card(self.report.to_dict()))
                answer = breakdown.text(self.report.findings)
                if answer:  # sorts before TAG_FINDINGS: the Text tab's first card
                    writer.text(TAG_BOTTLENECK, answer)
                bars = breakdown.bars(self.report.findings)
                if bars:
                    png = self.run_dir / BREAKDOWN_PNG
                    width, height = breakdown.png(bars, png)
                    writer.png(TAG_BREAKDOWN_PLOT, png.read_bytes(), width, height)
                writer.text(TAG_FINDINGS, reportmd.summary_markdown(self.report))
                writer.text(TAG_REPORT, reportmd.details_markdown(self.report))
                for tag, markdown in self._texts.items():
                    writer.text(tag, markdown)
        except OSError as exc:
            raise WriteFailed.of(exc, self.run_dir / REPORT_TB_RUN) from exc

    def _finish(self, *, interrupted: bool, signal_name: str | None,
                complete: bool | None) -> None:
        self.report.partial = interrupted if complete is None else not complete
        self.report.interrupted = interrupted
        if signal_name is not None:
            self.report.data["interrupted_by"] = signal_name
        self.report.finished_at = datetime.now(UTC).isoformat(timespec="seconds")

    def __enter__(self) -> RunSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        signal_name = None
        if isinstance(exc, KeyboardInterrupt):
            signal_name = signal.Signals(signum_of(exc)).name
        stopped_by_error = isinstance(exc, GpudiagError) and not isinstance(exc, WriteFailed)
        if stopped_by_error:  # bad input found mid-run: the cause belongs in the report
            assert isinstance(exc, GpudiagError)
            self.report.add(Finding(
                f"{self.report.command}.error", "fail", exc.message,
                {"error_type": type(exc).__name__, "exit_code": exc.exit_code},
                title=title(exc.message, f"gpudiag {self.report.command} stopped on bad "
                            "input: see the message"),
                advice="gpudiag stopped here; fix what the message names and run again."))
        try:
            self.close(interrupted=exc_type is not None and not stopped_by_error,
                       signal_name=signal_name, complete=exc_type is None)
        except WriteFailed:
            if exc_type is None:
                raise


class MemorySession(RunSession):
    """A session that writes nothing: the report is kept in memory (``report.run_dir`` is
    empty: no run directory holds it). ``run_dir`` is the path the report is about (the
    traces explained), so that a command's body that names it still reads true. Closing it
    marks the report complete or interrupted as RunSession does; no TensorBoard text."""

    def __init__(self, command: str, about: Path, *, argv: list[str] | None = None) -> None:
        self._begin(command, about, saved=False, argv=argv)

    def save(self) -> None:
        """Nothing is written."""

    def close(self, *, interrupted: bool, signal_name: str | None = None,
              complete: bool | None = None) -> None:
        self._finish(interrupted=interrupted, signal_name=signal_name, complete=complete)
