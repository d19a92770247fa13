"""``load_run``: a run directory read into a typed ``Run``; ``list_runs``: every run
directory under a logdir, newest first; ``opens_on``: the one of them a viewer opens on
with none named (the GPUDIAG tab, `gpudiag tensorboard` with no LOGDIR).

Every name comes from gpudiag.layout. Reads every version gpudiag has written
(report.json ``schema_version`` 1, with paths in the report absolute or relative to the
logdir's parent, as sample_runs/ keeps them): what the report's paths say is not trusted,
the files are looked up by their layout names under the run directory itself. A report
written by a newer gpudiag (a higher schema_version) is refused with one line.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.files import readable
from gpudiag.layout.evidence import Evidence
from gpudiag.report import Report
from gpudiag.rundir import validate
from gpudiag.rundir.confine import check_tree, read_confined, walk
from gpudiag.rundir.errors import RunDirError
from gpudiag.rundir.records import ChildFiles, Live, Run, RunStatus, typed_evidence


def _parse(path: Path, root: Path, unreadable: Callable[[str], str]) -> Any:
    """File ``path`` of run directory ``root`` (gpudiag.rundir.confine) as JSON (NaN and
    Infinity read, so that the check names where they are: gpudiag.rundir.validate);
    RunDirError ``unreadable(why)`` when it is not UTF-8 JSON nested MAX_DEPTH deep at most."""
    raw = read_confined(path, root)
    try:
        return json.loads(raw.decode("utf-8"))
    except RecursionError:
        why = f"nested deeper than {validate.MAX_DEPTH}"
    except (UnicodeDecodeError, ValueError) as exc:
        why = str(exc).splitlines()[0][:120]
    raise RunDirError(unreadable(why))


def _read_json(path: Path, root: Path) -> Any:
    """A child's JSON file; RunDirError when it is not a regular file inside the run
    directory of a bounded size (gpudiag.rundir.confine) or not JSON of depth
    MAX_DEPTH at most; None when there is none."""
    if not os.path.lexists(path):
        return None
    data = _parse(path, root, lambda why: f"{readable(str(path))}: not readable JSON ({why})")
    if not isinstance(data, dict):
        raise RunDirError(f"{readable(str(path))}: is a JSON {type(data).__name__}, not an "
                          "object")
    if (deep := validate.deep_or_not_finite(data)) is not None:
        raise RunDirError(f"{readable(str(path))}: {deep}")
    return data


def read_report(path: Path) -> dict[str, Any]:
    """report.json of run directory ``path`` as plain data; RunDirError when there is none
    or it is not a gpudiag report this gpudiag can read (gpudiag.rundir.validate: a field
    of another type, too deep, not finite; a regular file inside the run directory of at
    most MAX_JSON_BYTES: gpudiag.rundir.confine)."""
    shown = readable(str(path))
    try:
        if not path.exists():
            raise RunDirError(f"not a gpudiag run directory: {shown} (it does not exist)")
        if not path.is_dir():
            raise RunDirError(f"not a gpudiag run directory: {shown} (not a directory)")
        file = path / layout.REPORT_JSON
        if not os.path.lexists(file):
            raise RunDirError(f"not a gpudiag run directory: {shown} (no "
                              f"{layout.REPORT_JSON})")
    except (OSError, ValueError) as exc:  # a name too long, a NUL byte, a symlink loop
        raise RunDirError(f"not a gpudiag run directory: {shown[:160]} ({exc})") from None
    data = _parse(file, path, lambda why: f"not a gpudiag run directory: {shown} "
                  f"({layout.REPORT_JSON} is not readable JSON: {why})")
    if not isinstance(data, dict) or "command" not in data or "findings" not in data:
        raise RunDirError(f"not a gpudiag run directory: {shown} ({layout.REPORT_JSON} is "
                          "not a gpudiag report)")
    version = data.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and \
            version > layout.SCHEMA_VERSION:
        raise RunDirError(f"{shown}: {layout.REPORT_JSON} has schema_version {version!r}; "
                          f"this gpudiag reads versions up to {layout.SCHEMA_VERSION}")
    if (wrong := validate.problem(data)) is not None:
        raise RunDirError(f"{shown}: {layout.REPORT_JSON} is malformed: {wrong}")
    return data


def typed_report(data: dict[str, Any], malformed: str
                 ) -> tuple[Report, tuple[Evidence | None, ...]]:
    """A report's plain data as the typed Report and its findings' typed evidence;
    RunDirError "``malformed`` (why)" when a record does not decode."""
    try:
        report = Report.from_dict(data)
        return report, typed_evidence(report)
    except (KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{malformed} ({exc})") from None


def load_run(path: Path) -> Run:
    """The run directory ``path``, read (see the module docstring); RunDirError (exit 2,
    one line) when it is not one."""
    path = Path(path)
    data = read_report(path)
    own_files_only(path)
    report, evidence = typed_report(data, f"{path}: {layout.REPORT_JSON} is malformed")
    children = read_children(path)
    status = run_status(report, children)
    from gpudiag.rundir.loops import read_loops

    return Run(path=path, command=report.command, status=status,
               started_at=report.started_at, finished_at=report.finished_at,
               schema_version=int(data["schema_version"]), report=report, report_json=data,
               children=children, traces=find_traces(path),
               live=read_live(path, report, children) if status == "running" else None,
               _loops=read_loops, typed_evidence=evidence)


def own_files_only(path: Path) -> None:
    """RunDirError unless everything under the run directory ``path`` stays inside it and
    is a directory or a regular file (gpudiag.rundir.confine.check_tree): a run's own files
    (its children, its TensorBoard runs, its traces) are read only from inside it."""
    try:
        real = path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:
        raise RunDirError(f"{readable(str(path))[:160]}: cannot be resolved ({exc})") from None
    try:
        check_tree(real, real, what="the run directory")
    except RunDirError as exc:
        raise RunDirError(f"{readable(str(path))[:160]}: {exc.message}") from None


@dataclass(frozen=True)
class BadRun:
    """A directory holding a report.json that load_run refused, and why (one line)."""

    path: Path
    reason: str


def scan_runs(logdir: Path) -> tuple[list[Run], list[BadRun]]:
    """Every run directory under ``logdir`` (at any depth up to MAX_WALK_DEPTH; a cluster
    directory is not one; symlinked directories are not followed), newest first by its
    start time; and each directory whose report.json could not be read, or that leads out
    of the logdir (gpudiag.rundir.confine.check_tree), or that the walk did not look into
    (too deep, unreadable), with why. One bad entry never hides the others; a run that
    vanishes during the scan is passed over."""
    logdir = Path(logdir)
    if not logdir.is_dir():
        raise RunDirError(f"not a logdir: {readable(str(logdir))} (not a directory)")
    walked = walk(logdir, lambda name: name == layout.REPORT_JSON)
    runs: list[Run] = []
    bad = [BadRun(where, f"cannot read {readable(_relative(where, logdir))}: {why}")
           for where, why in walked.skipped]
    for report in walked.found:
        run_dir = report.parent
        if run_dir.name.startswith(layout.RUN_CLUSTER_DIR_PREFIX):
            continue
        try:
            check_tree(logdir, run_dir)
            runs.append(load_run(run_dir))
        except RunDirError as exc:
            if os.path.lexists(report):  # one gone since the walk found it is passed over
                bad.append(BadRun(run_dir, exc.message))
        except Exception as exc:  # a value no check foresaw: this run only, said
            bad.append(BadRun(run_dir, f"{readable(str(run_dir))}: not readable "
                                       f"({type(exc).__name__}: {str(exc)[:120]})"))
    runs.sort(key=lambda r: (r.started_at, r.path.name), reverse=True)
    return runs, sorted(bad, key=lambda b: b.path)


def _relative(path: Path, logdir: Path) -> str:
    return str(path.relative_to(logdir)) if path.is_relative_to(logdir) else str(path)


def list_runs(logdir: Path) -> list[Run]:
    """Every run directory under ``logdir`` that load_run reads (:func:`scan_runs`
    without the bad ones), newest first by its start time."""
    return scan_runs(logdir)[0]


#: Commands whose run directory holds no diagnosis of its own (a record of other runs).
RECORDS_OF_OTHER_RUNS = ("diff",)


def answers_a_question(run: Run) -> bool:
    """A complete run of a program or a probe (not a `gpudiag diff` record, not a run that
    failed, was interrupted or still runs): what the tab and `gpudiag tensorboard` open on."""
    return run.status == "complete" and run.command not in RECORDS_OF_OTHER_RUNS


def opens_on(runs: Sequence[Run]) -> Run | None:
    """The run a viewer opens on with none named: the newest that answers a question, else
    the newest complete run, else the newest (``runs`` newest first, as list_runs gives).
    A run inside another run's directory (a `gpudiag try` run's trials, started after it)
    is part of that run: the enclosing run is the one opened on."""
    listed = {r.path for r in runs}
    own = [r for r in runs if not any(p in listed for p in r.path.parents)] or list(runs)
    return next((r for r in own if answers_a_question(r)),
                next((r for r in own if r.status == "complete"), own[0] if own else None))


def read_children(path: Path) -> dict[str, ChildFiles]:
    root = path / layout.CHILDREN_DIR
    out: dict[str, ChildFiles] = {}
    if not root.is_dir():
        return out
    for child in sorted(p for p in root.iterdir() if p.is_dir()):
        def opt(name: str, where: Path = child) -> Path | None:
            return where / name if (where / name).is_file() else None
        events = tuple(sorted(child.glob(f"{layout.RUN_EVENTS_PREFIX}*"
                                         f"{layout.RUN_EVENTS_SUFFIX}")))
        config = _read_json(child / layout.CONFIG_JSON, path)
        result = _read_json(child / layout.RESULT_JSON, path)
        out[child.name] = ChildFiles(
            child.name, child, config, result, opt(layout.STDOUT_TXT),
            opt(layout.STDERR_TXT), events)
    return out


def find_traces(path: Path) -> tuple[Path, ...]:
    return tuple(walk(path, lambda name: name.endswith(layout.XPLANE_SUFFIX)).found)


def run_status(report: Report, children: dict[str, ChildFiles]) -> RunStatus:
    """complete, interrupted, running (report.json still partial, not interrupted), or
    failed: what the command was to observe never started (`run`/`monitor`: the program
    exited non-zero before TensorFlow was imported; a probe command: no child gave a
    result)."""
    if report.interrupted:
        return "interrupted"
    if report.partial and report.finished_at is None:
        return "running"
    if report.command in ("run", "monitor"):
        info = report.data.get(report.command) or {}
        code = info.get("returncode")
        if isinstance(code, int) and code != 0 and not info.get("tensorflow_processes"):
            return "failed"
    probed = [c for c in children.values() if c.config is not None]
    if probed and not any((c.result or {}).get("ok") for c in probed):
        return "failed"
    return "complete"


def read_live(path: Path, report: Report, children: dict[str, ChildFiles]) -> Live:
    mtime = (path / layout.REPORT_JSON).stat().st_mtime
    events = tuple(p for c in children.values() for p in c.events)
    tb = tuple(sorted(p for run in path.glob(f"{layout.RUN_TB_PREFIX}*")
                      for p in run.glob(layout.TB_EVENTS_GLOB)))
    return Live(mtime, events, tb, len(report.findings))
