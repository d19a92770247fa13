"""The format contract: what gpudiag writes on disk, and under which names.

Everything that writes or reads a run directory goes through this module.

A logdir (``--logdir``, default ``runs/``) holds one run directory per command
invocation, named ``<UTC timestamp>-<command>`` (``2026-11-21T22-15-03-placement``);
a second run in the same second gets a ``-2``, ``-3`` ... suffix. A run directory is
created exclusively and is never reused, so nothing written earlier is overwritten.

Inside a run directory::

    report.json        the contract: ``schema_version`` = SCHEMA_VERSION, see
                       gpudiag/report.schema.json; every finding with its evidence
    report.md          the same report for people
    report/            TensorBoard run: the report as a markdown text summary
                       (tag TAG_REPORT) and, per command, its tables (TAG_PLACEMENT ...)
    children/<name>/   per child process: config.json, result.json, stdout.txt,
                       stderr.txt (the whole of the child's output, kept as evidence)
    nvml/              TensorBoard run: per-GPU NVML scalars (``gpu<i>/util_percent`` ...)
    <config>/          one TensorBoard run per probe configuration (scaling, memory)

``report.json`` is written first with ``"partial": true`` when a run starts and
rewritten as findings arrive, so an interrupted run still leaves a readable report.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

from gpudiag.errors import UsageError

SCHEMA_VERSION = 1

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_TB_RUN = "report"
CHILDREN_DIR = "children"
NVML_TB_RUN = "nvml"

TAG_REPORT = "gpudiag/report"
TAG_PLACEMENT = "gpudiag/placement"


def check_logdir(logdir: Path) -> Path:
    """Validate a user-given logdir: it may not exist yet, but must be a writable directory.

    Raises UsageError (exit 2) with a one-line message otherwise. Creates nothing.
    """
    logdir = logdir.expanduser()
    _check_name_lengths(logdir)
    probe = logdir
    while not probe.exists():
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if probe.exists() and not probe.is_dir():
        what = "is a file" if probe == logdir else f"has a file in its path ({probe})"
        raise UsageError(f"--logdir {logdir} {what}, not a directory")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--logdir {logdir} is not writable (no write permission on {probe})")
    return logdir


#: Room kept for what gpudiag adds under the logdir (run directory, children/<probe>/...).
_RUN_PATH_ROOM = 160


def _check_name_lengths(logdir: Path) -> None:
    """The OS limits a name (NAME_MAX, 255 bytes on Linux) and a path (PATH_MAX, 4096):
    refuse before creating anything, rather than leave half a directory tree behind."""
    try:
        name_max = os.pathconf("/", "PC_NAME_MAX")
        path_max = os.pathconf("/", "PC_PATH_MAX")
    except (OSError, ValueError):
        name_max, path_max = 255, 4096
    for part in logdir.parts:
        if len(os.fsencode(part)) > name_max:
            raise UsageError(f"--logdir: the name {part[:40]}... is longer than the "
                             f"{name_max} bytes a file name may have")
    if len(os.fsencode(str(logdir.absolute()))) + _RUN_PATH_ROOM > path_max:
        raise UsageError(f"--logdir is too long: {len(str(logdir.absolute()))} characters, "
                         f"leaving no room under the OS's {path_max}-byte path limit")


def new_run_dir(logdir: Path, command: str, now: datetime | None = None) -> Path:
    """Create and return a fresh run directory under ``logdir``; never reuses one."""
    logdir = check_logdir(logdir)
    stamp = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H-%M-%S")
    try:
        logdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--logdir {logdir} cannot be created: {exc.strerror}") from exc
    base = f"{stamp}-{command}"
    for n in range(1, 1000):
        candidate = logdir / (base if n == 1 else f"{base}-{n}")
        try:
            candidate.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise UsageError(f"--logdir {logdir} is not writable: {exc.strerror}") from exc
        return candidate
    raise UsageError(f"--logdir {logdir}: too many runs named {base}")


def child_dir(run_dir: Path, name: str) -> Path:
    """Directory holding one child process's config, result and whole output."""
    path = run_dir / CHILDREN_DIR / name
    path.mkdir(parents=True, exist_ok=True)
    return path
