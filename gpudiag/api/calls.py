"""The library's four calls (docs/api.md): thin, over the code the commands run.

``load_run`` and ``list_runs`` read run directories (gpudiag.rundir); ``explain`` is
`gpudiag explain` (gpudiag.commands.explain) and ``diff`` is `gpudiag diff`
(gpudiag.commands.diff), each run with a quiet Ui and returning the Run instead of
rendering it. Given a ``logdir``, they write a run directory there, as the commands do;
without one they write nothing and the Run is kept in memory (``run.report.run_dir`` is
empty). An OSError that escapes the readers becomes gpudiag's own error at this edge: a
full or read-only disk WriteFailed, anything else a UsageError, one line each.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

from gpudiag import rundir
from gpudiag.errors import UsageError, WriteFailed
from gpudiag.rundir import Run
from gpudiag.ui import Ui

PathLike = str | os.PathLike[str]

_DISK_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG, errno.EIO})


@contextlib.contextmanager
def _edge() -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if exc.errno in _DISK_ERRNOS:
            raise WriteFailed.of(exc, exc.filename or "a run file") from None
        raise UsageError(f"cannot read {exc.filename or 'a file'}: "
                         f"{exc.strerror or exc}") from None


def _path(value: PathLike, what: str) -> Path:
    """``value`` as a Path; UsageError (one line) unless it is a str or an os.PathLike
    whose __fspath__ gives a str (bytes, or an exception from it, are said)."""
    if not isinstance(value, str | os.PathLike):
        raise UsageError(f"{what} must be a path (str or os.PathLike), not "
                         f"{type(value).__name__}")
    try:
        text = os.fspath(value)
    except Exception as exc:  # a PathLike of the caller's whose __fspath__ raises
        raise UsageError(f"{what}: its __fspath__ raised {type(exc).__name__}") from None
    if not isinstance(text, str):
        raise UsageError(f"{what} must be a path of text: its __fspath__ gave "
                         f"{type(text).__name__}, not str")
    return Path(text)


def _call(name: str, *paths: Path, logdir: Path | None) -> list[str]:
    """What report.json records as the command of a library call: the call itself, as
    ``gpudiag.explain('logs/', logdir='runs')`` (not the Python process's argv)."""
    args = [repr(str(p)) for p in paths]
    if logdir is not None:
        args.append(f"logdir={str(logdir)!r}")
    return [f"gpudiag.{name}({', '.join(args)})"]


def load_run(path: PathLike) -> Run:
    """Read the run directory ``path`` (any gpudiag command's, running or done).

    Returns the typed Run: ``run.report.findings`` (gpudiag.report.Finding records: id,
    status, message, evidence, advice), ``run.status``, ``run.loops`` (the step series),
    ``run.breakdown`` (each bottleneck finding's per-device step parts), ``run.traces``.
    Raises RunDirError (one line) when ``path`` is not a run directory this gpudiag reads.
    """
    with _edge():
        return rundir.load_run(_path(path, "path"))


def list_runs(logdir: PathLike) -> list[Run]:
    """Every run directory under ``logdir`` (at any depth), newest first; directories that
    are not readable runs are left out. Raises RunDirError when ``logdir`` is not a
    directory."""
    with _edge():
        return rundir.list_runs(_path(logdir, "logdir"))


def explain(path: PathLike, *, logdir: PathLike | None = None) -> Run:
    """Where the steps' time went in profiler traces that already exist, as `gpudiag
    explain PATH` finds it: one ``explain.bottleneck`` finding per trace (per device
    compute, copy, input, communication, host, idle, and the bottleneck with its fix).

    ``path``: one ``.xplane.pb`` file, a ``plugins/profile/<run>`` directory, a TensorBoard
    logdir, or a gpudiag run directory holding traces (every trace under it is read).
    Nothing is run and no GPU is needed. With ``logdir``, the result is also written there
    as an `explain` run directory (``run.path``); without, nothing is written and
    ``run.path`` is ``path``. Raises UsageError (one line) when ``path`` holds no readable
    trace, before anything is written.
    """
    from gpudiag.commands import explain as explain_cmd

    where = _path(path, "path")
    into = None if logdir is None else _path(logdir, "logdir")
    with _edge():
        return explain_cmd.explained(where, into, Ui.quiet(),
                                     argv=_call("explain", where, logdir=into))


def diff(a: PathLike, b: PathLike, *, logdir: PathLike | None = None) -> Run:
    """Did the change work, as `gpudiag diff A B` judges it: the step time of each loop
    with its 95 % interval, the step's parts and the bottleneck before and after, the fix's
    predicted step against the measured one (``run.report.data["diff"]`` holds the record,
    ``run.report.findings`` the ``diff.*`` findings).

    ``a`` (before) and ``b`` (after): run directories, or directories holding profiler
    traces (explained first, as ``explain`` does). With ``logdir``, the diff (and any
    traces' explain run) is written there; without, nothing is written and ``run.path`` is
    B's. Raises RunDirError (one line) when a side is neither a run nor traces, or has no
    step series or profiled step to compare.
    """
    from gpudiag.commands import diff as diff_cmd

    before, after = _path(a, "a"), _path(b, "b")
    into = None if logdir is None else _path(logdir, "logdir")
    quiet = Ui.quiet()
    with _edge():
        run_a = diff_cmd.resolve(before, into, quiet, argv=_call("explain", before, logdir=into))
        run_b = diff_cmd.resolve(after, into, quiet, argv=_call("explain", after, logdir=into))
        return diff_cmd.compared(run_a, run_b, into,
                                 argv=_call("diff", before, after, logdir=into))
