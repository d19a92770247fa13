"""On-disk names of `gpudiag run` (gpudiag/run/); part of gpudiag.layout."""

from __future__ import annotations

import re
from pathlib import Path

# ---------------------------------------------------------------- `gpudiag run`
#
# What `gpudiag run -- CMD ...` writes beside report.json, report.md, report/ and nvml/:
#
#     children/program/stdout.txt        the program's whole stdout, as it came
#     children/program/stderr.txt        its whole stderr, including the lines kept out
#                                        of the terminal (placement log, gpudiag markers)
#     children/program/events-<pid>.jsonl  what the hooks saw in one Python process of the
#                                        program: one JSON object per line, appended as it
#                                        happens, each one of the event records of
#                                        layout/events.py, layout/loopevents.py
#     children/program/faults-<pid>.txt  faulthandler's Python stack of a fatal signal
#                                        (SIGSEGV ...), when there was one
#     program-<pid>/                     TensorBoard run of one TensorFlow process: its
#                                        loss, metrics and step time (TAG_RUN_*), and the
#                                        profiler trace under plugins/profile/<ts>/
#
# A program whose processes join a multi-worker or parameter-server cluster also writes,
# directly under the logdir, one directory per cluster (every `gpudiag run` sharing the
# logdir writes into the same one, so their tasks are reported together):
#
#     cluster-<key>/tasks/<type>-<index>-<host>-<pid>.json   one TaskReport per task seen
#     cluster-<key>/report.json, report.md    the cluster's findings over every task seen so
#                                             far, rewritten by each run as it ends
#     cluster-<key>/.lock                     held while a run writes its tasks and the report
#     cluster-<key>/live/<type>-<index>.json  one task's live state while it runs (steps,
#                                             its stall and where it waits, how it ended),
#                                             rewritten whole (atomic) by its own `gpudiag
#                                             run` as it changes, a few KB; read by the
#                                             other runs (gpudiag.run.peers)
#
# <key> is a digest of the cluster spec (gpudiag.run.tasks.cluster_key).
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
# The program's Python processes as gpudiag's parent saw them in /proc, one JSON object a
# line, appended as each is first seen: {"pid", "command", "why"} (gpudiag.run.processes;
# "why": why the hooks could not enter it, if they could not, decided as it was seen)
RUN_PROCESSES = "processes.jsonl"
RUN_TB_PREFIX = "program-"

# Environment of the program (set by the parent, read by the hooks).
ENV_RUN_CONFIG = "GPUDIAG_RUN_CONFIG"  # JSON: RunHookConfig (gpudiag/inprogram/config.py)
ENV_RUN_PKG_ROOT = "GPUDIAG_RUN_PKG_ROOT"  # directory holding the gpudiag package

# Marker lines on the program's stderr: RUN_MARKER + one of RUN_MARK_*.
RUN_MARKER = "GPUDIAG-RUN "
RUN_MARK_PLACEMENT_ASKED = "placement-asked"  # the program itself enabled the placement log
RUN_MARK_QUIET_BEGIN = "quiet-begin"  # TF log lines caused by gpudiag's own calls follow
RUN_MARK_QUIET_END = "quiet-end"
RUN_MARK_HOOK_ERROR = "hook-error"  # the hooks could not load at all (message follows)
# TF_CPP_MIN_LOG_LEVEL as the program had it when it imported TensorFlow (value follows,
# empty: unset); the terminal filter then follows it
RUN_MARK_CPP_LEVEL = "cpp-level"

# TensorBoard scalar tags of the program's run (program-<pid>/).
TAG_RUN_LOSS = "program/loss"
TAG_RUN_METRIC = "program/{name}"  # Keras metrics by their name (accuracy ...)
TAG_RUN_STEP_TIME = "program/step_time_s"
TAG_RUN_EXAMPLES_PER_S = "program/examples_per_s"
# every step's index, written as the step is seen: a step's time needs the next step's
# start, so while a program waits after a step, this is what says how far it got
TAG_RUN_STEP = "program/step"
# A process's first loop writes the tags above; each other loop the same tags under
# ``program/<prefix>/`` (TAG_PROGRAM_ROOT + loop_prefix(its label) + "/"): loop_tag makes
# such a tag, parse_loop_tag reads one back.
TAG_PROGRAM_ROOT = "program/"
LOOP_PREFIX_MAX = 40


def loop_prefix(label: str) -> str:
    """A loop's tag prefix from its label (``tf.function train_step`` ->
    ``tf.function_train_step``): letters, digits, ``_`` and ``.`` kept, every other run
    of characters one ``_``, at most LOOP_PREFIX_MAX characters."""
    return re.sub(r"[^A-Za-z0-9_.]+", "_", label).strip("_")[:LOOP_PREFIX_MAX]


def loop_tag(tag: str, prefix: str) -> str:
    """``tag`` (one of TAG_RUN_*) for the loop of ``prefix`` ("": the first loop)."""
    return tag.replace(TAG_PROGRAM_ROOT, f"{TAG_PROGRAM_ROOT}{prefix}/", 1) if prefix else tag


def parse_loop_tag(tag: str) -> tuple[str, str] | None:
    """(prefix, name) of a program tag (``program/<prefix>/<name>``; the first loop's
    ``program/<name>``: prefix ""); None: not a program tag."""
    if not tag.startswith(TAG_PROGRAM_ROOT):
        return None
    prefix, _, name = tag[len(TAG_PROGRAM_ROOT):].rpartition("/")
    return (prefix, name) if name else None
TAG_RUN_TABLE = "gpudiag/run"  # text: one row per process of the program
TAG_RUN_LIVE = "gpudiag/live"  # text: what gpudiag told the terminal while it ran


RUN_CLUSTER_DIR_PREFIX = "cluster-"
RUN_CLUSTER_TASKS_DIR = "tasks"
RUN_CLUSTER_LOCK = ".lock"
RUN_CLUSTER_LIVE_DIR = "live"
RUN_CLUSTER_LIVE_SUFFIX = ".json"


def run_cluster_dir(logdir: Path, key: str) -> Path:
    return logdir / f"{RUN_CLUSTER_DIR_PREFIX}{key}"


def run_task_file_name(task_type: str, task_id: int, host: str, pid: int) -> str:
    safe_host = "".join(c if c.isalnum() or c in "-." else "_" for c in host) or "host"
    return f"{task_type}-{task_id}-{safe_host}-{pid}.json"


def run_task_live_name(task_type: str, task_id: int) -> str:
    """``worker-1.json``: one task's live state (one per task: a restart rewrites it)."""
    safe = "".join(c if c.isalnum() or c in "-_" else "_" for c in task_type) or "task"
    return f"{safe}-{task_id}{RUN_CLUSTER_LIVE_SUFFIX}"


def run_events_name(pid: int) -> str:
    return f"{RUN_EVENTS_PREFIX}{pid}{RUN_EVENTS_SUFFIX}"


def run_faults_name(pid: int) -> str:
    return f"{RUN_FAULTS_PREFIX}{pid}.txt"


def run_tb_name(pid: int) -> str:
    return f"{RUN_TB_PREFIX}{pid}"
