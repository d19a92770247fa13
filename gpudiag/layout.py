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


# ---------------------------------------------------------------- `gpudiag run`
#
# What `gpudiag run -- CMD ...` writes beside report.json, report.md, report/ and nvml/:
#
#     children/program/stdout.txt        the program's whole stdout, as it came
#     children/program/stderr.txt        its whole stderr, including the lines kept out
#                                        of the terminal (placement log, gpudiag markers)
#     children/program/events-<pid>.jsonl  what the hooks saw in one Python process of the
#                                        program: one JSON object per line, appended as it
#                                        happens (RUN_EVENT_FIELDS below)
#     children/program/faults-<pid>.txt  faulthandler's Python stack of a fatal signal
#                                        (SIGSEGV ...), when there was one
#     program-<pid>/                     TensorBoard run of one TensorFlow process: its
#                                        loss, metrics and step time (TAG_RUN_*), and the
#                                        profiler trace under plugins/profile/<ts>/
#
# The hooks are loaded into the program's interpreter through RUN_HOOKS_PACKAGE's
# directory on PYTHONPATH (its sitecustomize.py chains to any other sitecustomize) and
# configured by the environment variables ENV_RUN_*. Marker lines (RUN_MARKER + word)
# are written by the hooks to the program's stderr, in order with TensorFlow's own log
# lines, and never reach the terminal.

RUN_CHILD_NAME = "program"
RUN_STDOUT = "stdout.txt"
RUN_STDERR = "stderr.txt"
RUN_EVENTS_PREFIX = "events-"
RUN_EVENTS_SUFFIX = ".jsonl"
RUN_FAULTS_PREFIX = "faults-"
RUN_TB_PREFIX = "program-"

# Environment of the program (set by the parent, read by the hooks).
ENV_RUN_CONFIG = "GPUDIAG_RUN_CONFIG"  # JSON: RunHookConfig (gpudiag/run/config.py)
ENV_RUN_PKG_ROOT = "GPUDIAG_RUN_PKG_ROOT"  # directory holding the gpudiag package

# Marker lines on the program's stderr: RUN_MARKER + one of RUN_MARK_*.
RUN_MARKER = "GPUDIAG-RUN "
RUN_MARK_PLACEMENT_ASKED = "placement-asked"  # the program itself enabled the placement log
RUN_MARK_QUIET_BEGIN = "quiet-begin"  # TF log lines caused by gpudiag's own calls follow
RUN_MARK_QUIET_END = "quiet-end"
RUN_MARK_HOOK_ERROR = "hook-error"  # the hooks could not load at all (message follows)

# Fields every event line has; the rest depend on "kind" (gpudiag/run/records.py).
RUN_EVENT_FIELDS = ("kind", "t", "pid")

# TensorBoard scalar tags of the program's run (program-<pid>/).
TAG_RUN_LOSS = "program/loss"
TAG_RUN_METRIC = "program/{name}"  # Keras metrics by their name (accuracy ...)
TAG_RUN_STEP_TIME = "program/step_time_s"
TAG_RUN_EXAMPLES_PER_S = "program/examples_per_s"
TAG_RUN_TABLE = "gpudiag/run"  # text: one row per process of the program


def run_events_name(pid: int) -> str:
    return f"{RUN_EVENTS_PREFIX}{pid}{RUN_EVENTS_SUFFIX}"


def run_faults_name(pid: int) -> str:
    return f"{RUN_FAULTS_PREFIX}{pid}.txt"


def run_tb_name(pid: int) -> str:
    return f"{RUN_TB_PREFIX}{pid}"
