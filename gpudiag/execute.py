"""How every command runs once its options are parsed: in a RunSession, with the
findings rendered, the exit code chosen, and Ctrl-C, SIGTERM, SIGHUP and full disks
turned into a finished report and one line (gpudiag.cli's commands call ``execute``;
``main`` installs gpudiag.procs.stops' handlers), NVML opened for a command that needs it
(``nvml_for``).

Exit codes: 0 all checks passed, 1 a check failed, 2 bad usage or input, 3 environment
broken (a full disk included), 128 + N ended by signal N (130 Ctrl-C). `monitor` and `run`
end with the watched command's own code, whatever the findings (a wrapper must not change
a job's outcome, as `time` and `nsys profile` do not); with ``strict`` (--strict), 1 when a
check failed and the command exited 0.
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import os
import signal
import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console

from gpudiag.errors import GpudiagError, WriteFailed, signum_of
from gpudiag.layout import REPORT_MD
from gpudiag.procs import stops
from gpudiag.report import ICON, SUMMARY_ORDER, Report
from gpudiag.report import to_json as report_to_json
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import headline

if TYPE_CHECKING:
    from gpudiag.nvml import NvmlBackend, NvmlUnavailable, Opener


def execute(command: str, logdir: Path, as_json: bool,
             body: Callable[[RunSession, Ui], int | None], *,
             watches_a_command: bool = False, strict: bool = False) -> NoReturn:
    """Run one command's body in a session, render the findings, exit with their code
    (or with the watched command's, e.g. `monitor` forwarding its command's). Never
    returns: every path ends in ``typer.Exit``."""
    # stdout is the data's: report.json with --json, the watched command's own output for
    # `monitor` and `run` (gpudiag's lines would be mixed into a file the user redirects it to)
    console = _Console(stderr=as_json or watches_a_command)
    ui = Ui(console)
    session = RunSession(command, logdir)
    console.run_dir = session.run_dir
    try:
        with session:
            console.print(f"[bold]gpudiag {command}[/] -> {session.run_dir}")
            forwarded = body(session, ui)
            stops.check()  # a stop request a callback dropped: acted on, as if it came now
    except KeyboardInterrupt as exc:  # Ctrl-C, SIGTERM, SIGHUP (errors.Interrupted)
        stops.acted()
        signum = signum_of(exc)
        render_table(session.report, console)
        console.print(f"interrupted by {signal.Signals(signum).name}: the partial report "
                      f"is in {session.run_dir}")
        show_verdict(session, console)
        print_json(session, as_json)
        raise typer.Exit(128 + signum) from None
    except WriteFailed as exc:
        if session.forwarded_exit is None:
            raise
        error_line(exc.message, exc.exit_code)  # the report is incomplete; the code is the user's
        raise typer.Exit(session.forwarded_exit) from None
    render_table(session.report, console)
    show_verdict(session, console)
    print_json(session, as_json)
    if session.forwarded_exit is not None:
        code = session.forwarded_exit
        if strict and code == 0:
            code = session.report.exit_code()
        raise typer.Exit(code)
    raise typer.Exit(session.report.exit_code() if forwarded is None else forwarded)


def show_verdict(session: RunSession, console: Console) -> None:
    """The command's last lines: the short verdict (gpudiag.verdicts.headline), each line as it is
    (no wrapping, no markup), then nothing else of gpudiag's."""
    report_md = _shown(session.run_dir / REPORT_MD)
    console.print()
    for line in headline.terminal(session.report.to_dict(), report_md,
                                  _shown(session.run_dir.parent)):
        console.print(line, soft_wrap=True, markup=False, highlight=False)


def _shown(path: Path) -> str:
    """``path`` as the user can type it here: relative to the working directory when it is
    under it (short enough for one line of 80 columns)."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return str(path)


def _silence_stdout() -> None:
    with contextlib.suppress(OSError, ValueError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


class _Console(Console):
    """rich's Console, except that a stdout closed under it (``gpudiag run ... | head -2``)
    does not end gpudiag with a silent exit 1 (rich's default): it is said once on stderr,
    gpudiag's own output stops, and the exit code stays what the run decides."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.run_dir: Path | None = None

    def on_broken_pipe(self) -> None:
        if self.quiet:
            return
        self.quiet = True
        # Not now: the program's output still goes to this stdout, and it is the program
        # that must meet the broken pipe (gpudiag.run.streams). At exit, nothing is left
        # to flush into the closed pipe.
        atexit.register(_silence_stdout)
        where = f"; the report is in {self.run_dir}" if self.run_dir else ""
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.write(f"gpudiag: stdout was closed (broken pipe): gpudiag's own "
                             f"output stopped there{where}\n")


def exit_code_of(exc: BaseException) -> int:
    """What ended the command line, as an exit code and (for an error) one line on stderr:
    typer's exits and usage errors, gpudiag's own errors, an interrupt, a full disk.
    Anything else is a bug and is raised again."""
    if isinstance(exc, typer.Exit):
        return int(exc.exit_code)
    if isinstance(exc, typer.Abort):  # click turns a KeyboardInterrupt (and SIGTERM's) into it
        return interrupted_exit() or error_line("aborted", EXIT_INTERRUPTED)
    if isinstance(exc, typer.TyperException):  # usage errors: bad values, unknown options
        if type(exc).__name__ == "NoArgsIsHelpError":  # no arguments at all: the help, as is
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.write(exc.format_message().rstrip("\n") + "\n")
            return int(getattr(exc, "exit_code", 2))
        message = " ".join(exc.format_message().split())
        if not message:  # click printed the help itself: nothing is wrong
            return int(getattr(exc, "exit_code", 2))
        return error_line(message, getattr(exc, "exit_code", 2))
    if isinstance(exc, GpudiagError):
        return error_line(exc.message, exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        signum = int(getattr(exc, "signum", signal.SIGINT))
        return error_line(f"interrupted by {signal.Signals(signum).name}", 128 + signum)
    if isinstance(exc, OSError) and exc.errno in DISK_ERRNOS:  # outside the report's paths
        failed = WriteFailed.of(exc, exc.filename or "a run file")
        return error_line(failed.message, failed.exit_code)
    raise exc


def print_json(session: RunSession, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(report_to_json(session.report))
        sys.stdout.flush()


def error_line(message: str, code: int) -> int:
    sys.stderr.write(f"gpudiag: error: {message}\n")
    return code


EXIT_INTERRUPTED = 130  # 128 + SIGINT
#: OSErrors that mean the disk, not gpudiag, is at fault: one line, exit 3.
DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


def interrupted_exit() -> int | None:
    """After an exception escaped a command: 128 + the signal that caused it, said in one
    line, when a handled signal had arrived (else None)."""
    signum = stops.first_received()
    if signum is None:
        return None
    return error_line(f"interrupted by {signal.Signals(signum).name}", 128 + signum)


def nvml_for(ctx: typer.Context) -> AbstractContextManager[NvmlBackend | NvmlUnavailable]:
    """NVML for one command: opened with the opener ``main`` was given (the real one by
    default) when the ``with`` block starts, closed when it ends."""
    from gpudiag import nvml

    opener: Opener | None = ctx.obj
    return nvml.opened(opener)


def execute_with_nvml(ctx: typer.Context, command: str, logdir: Path, as_json: bool,
                      body: Callable[[RunSession, NvmlBackend | NvmlUnavailable, Ui], None]
                      ) -> NoReturn:
    """:func:`execute` for a command whose body reads NVML: opened inside the session (the
    run directory exists first), closed when the body ends."""

    def in_session(session: RunSession, ui: Ui) -> None:
        with nvml_for(ctx) as backend:
            body(session, backend, ui)

    execute(command, logdir, as_json, in_session)


_STYLE = {"ok": "green", "warn": "yellow", "fail": "bold red", "skip": "dim"}


def render_table(report: Report, console: Any) -> None:
    """The terminal's findings on ``console`` (a rich.console.Console): one entry per finding,
    worst first, its status, id and title (a report without titles: its message), wrapped
    under the console's width with a hanging indent, never cut (the whole message, the
    evidence and the advice are in report.md). The verdict follows it (gpudiag.execute)."""
    from rich.text import Text

    width = max(40, console.width - 1)
    for status in SUMMARY_ORDER:
        for f in report.findings:
            if f.status != status:
                continue
            lines = headline.wrap(f"{ICON[f.status]:<4}  {f.id}: {f.headline}", width,
                                  indent=" " * 6)
            for n, text in enumerate(lines):
                line = Text(text, style="")
                if n == 0:
                    line.stylize(_STYLE[f.status], 0, len(ICON[f.status]))
                console.print(line, soft_wrap=True, highlight=False)
