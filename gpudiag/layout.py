"""The format contract: what gpudiag writes on disk, and under which names.

Every name a writer puts on disk and a reader looks up (run-directory and file names,
TensorBoard runs and tags, the progress lines a child prints) is defined here once;
writers and readers import it. Imports nothing heavy (no TensorFlow, no NVML).

A logdir (``--logdir``, default ``runs/``) holds one run directory per command
invocation, named ``<UTC timestamp>-<command>`` (``2026-11-21T22-15-03-placement``);
a second run in the same second gets a ``-2``, ``-3`` ... suffix. A run directory is
created exclusively and is never reused, so nothing written earlier is overwritten.

Inside a run directory::

    report.json          the contract: ``schema_version`` = SCHEMA_VERSION, see
                         gpudiag/report.schema.json; every finding with its evidence
    report.md            the same report for people
    report/              TensorBoard run: the report as markdown text (TAG_REPORT) and,
                         per command, its tables (TAG_PLACEMENT, TAG_MEMORY, TAG_MONITOR,
                         TAG_SCALING_TABLE)
    children/<name>/     per child process: config.json (what the parent asked),
                         result.json (``{"ok": ..., "result" | "error" ...}``), stdout.txt,
                         stderr.txt (the whole of the child's output, kept as evidence)
    nvml/                TensorBoard run (monitor): per-GPU NVML scalars, ``gpu_tag``
    memory-<mode>/       TensorBoard run per memory mode (memory): TAG_MEMORY_* scalars
    <strategy>-<n>dev/   TensorBoard run per scaling configuration (``config_run_name``),
                         written by the training child with tf.summary: the TAG_TRAIN_*,
                         tower, histogram and TAG_EVAL_* tags below, the hparams plugin's
                         session, ``checkpoints/`` (CHECKPOINT_DIR) and the profiler trace
                         ``plugins/profile/<ts>/<host>.xplane.pb`` (steps marked
                         PROFILER_STEP_MARKER; each tower's ops under ``tower_scope(i)``,
                         the averaging under AVERAGE_GRADIENTS_SCOPE); a ``keras`` run's
                         Keras callback writes its own tags under ``train/`` (KERAS_TRAIN_RUN)
    nvml/<config>/       (scaling) NVML scalars sampled while that configuration ran
    scaling/             TensorBoard run (SCALING_TB_RUN): examples/s and efficiency per
                         strategy against the device count, the table, the plot image
    allreduce/           TensorBoard run (ALLREDUCE_TB_RUN): bus/algorithm bandwidth and
                         time against the message size in MiB, the table as text
    scaling.png          the scaling plot (PLOT_PNG)

``report.json`` is written first with ``"partial": true`` when a run starts and
rewritten as findings arrive, so an interrupted run still leaves a readable report.

Every scalar, in every run, is a scalar-plugin tensor summary (what ``tf.summary.scalar``
writes in the child and ``tensorboard.plugins.scalar.summary_v2.scalar_pb`` in the
parent): one way to read them all. Text is the text plugin's, images the image plugin's
``[width, height, png]`` string tensor.

A training child with ``progress`` on prints one progress line per step on its stdout,
``GPUDIAG-STEP <step> <total> <loss>`` (``step_line``); the parent follows stdout.txt and
reads them with ``parse_step_line``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gpudiag.errors import UsageError

SCHEMA_VERSION = 1

# --------------------------------------------------------------------- run directory

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_TB_RUN = "report"
CHILDREN_DIR = "children"
NVML_TB_RUN = "nvml"
SCALING_TB_RUN = "scaling"
ALLREDUCE_TB_RUN = "allreduce"
PLOT_PNG = "scaling.png"
MEMORY_TB_RUN_PREFIX = "memory-"
CHECKPOINT_DIR = "checkpoints"  # inside a configuration's run: tf.train.CheckpointManager
KERAS_TRAIN_RUN = "train"  # inside a keras configuration's run: Keras's TensorBoard callback

# Files of one child process, in children/<name>/
CONFIG_JSON = "config.json"
RESULT_JSON = "result.json"
STDOUT_TXT = "stdout.txt"
STDERR_TXT = "stderr.txt"
ALLREDUCE_CHILD = "allreduce"  # scaling's collective probe; its configurations: config_run_name


def config_run_name(strategy: str, n_devices: int) -> str:
    """``towers-4dev``: a scaling configuration's TensorBoard run and child name."""
    return f"{strategy}-{n_devices}dev"


def memory_run_name(mode: str) -> str:
    """``memory-growth``: one memory mode's TensorBoard run."""
    return f"{MEMORY_TB_RUN_PREFIX}{mode}"


# ---------------------------------------------------------------- text and image tags

TAG_REPORT = "gpudiag/report"
TAG_PLACEMENT = "gpudiag/placement"
TAG_MEMORY = "gpudiag/memory"
TAG_MONITOR = "gpudiag/monitor"
TAG_SCALING_TABLE = "gpudiag/scaling"
TAG_SCALING_PLOT = "gpudiag/scaling_plot"
TAG_ALLREDUCE_TABLE = "gpudiag/allreduce"
TAG_TRAIN_CONFIG = "gpudiag/config"  # a configuration's settings, once, as a markdown table

# ------------------------------------------------------- a scaling configuration's run
# Written by the training child (gpudiag/train/); steps start at 1 (the first update).

TAG_TRAIN_LOSS = "train/loss"  # every step: mean loss over the global batch
TAG_TRAIN_ACCURACY = "train/accuracy"
TAG_TRAIN_LEARNING_RATE = "train/learning_rate"
TAG_TRAIN_EXAMPLES_PER_S = "train/examples_per_s"  # global batch / step wall time
TAG_TRAIN_STEP_S = "train/step_s"  # wall seconds per batch (sec/batch)
TAG_EVAL_ACCURACY = "eval/accuracy"  # at the end, held-out set, raw weights
TAG_EVAL_LOSS = "eval/loss"
TAG_EVAL_ACCURACY_EMA = "eval/accuracy_ema"  # at the end, moving-average weights
TAG_EVAL_LOSS_EMA = "eval/loss_ema"
# Name scopes in a configuration's graphs and profiler trace: each tower's (replica's)
# ops, and the towers' gradient averaging.
AVERAGE_GRADIENTS_SCOPE = "average_gradients"


def tower_scope(index: int) -> str:
    """``tower_<i>``: the name scope of tower (replica) ``index``'s ops."""
    return f"tower_{index}"


# Profiler step markers in a configuration's xplane.pb: ours
# (tf.profiler.experimental.Trace(PROFILER_STEP_MARKER, step_num=...)) and Keras's.
PROFILER_STEP_MARKER = "train"
KERAS_PROFILER_STEP_MARKER = "TraceContext"


def tower_loss_tag(index: int) -> str:
    """Scalar, every step: the loss of tower (replica) ``index``'s slice of the batch."""
    return f"towers/loss_{index}"


def gradient_tag(param: str) -> str:
    """Histogram: the gradient of ``param`` averaged over the towers."""
    return f"gradients/{param}"


def variable_tag(param: str) -> str:
    """Histogram: the weights of ``param`` after the update."""
    return f"variables/{param}"


def ema_tag(param: str) -> str:
    """Histogram: the moving average of ``param``."""
    return f"ema/{param}"


# ------------------------------------------------------------------- parent scalars


def gpu_util_tag(index: int) -> str:
    """NVML utilization (nvidia-smi's utilization.gpu) of GPU ``index``, percent."""
    return f"gpu{index}/util_percent"


def gpu_util_driver_tag(index: int) -> str:
    """The driver's finer utilization samples (nvmlDeviceGetSamples), percent."""
    return f"gpu{index}/util_driver_percent"


def gpu_memory_used_tag(index: int) -> str:
    """Device memory in use on GPU ``index``, MiB."""
    return f"gpu{index}/memory_used_mib"


def gpu_power_tag(index: int) -> str:
    """Power draw of GPU ``index``, watts."""
    return f"gpu{index}/power_w"


# memory-<mode>/ runs: TensorFlow's and NVML's view per allocation step (MiB)
TAG_MEMORY_TF_CURRENT = "memory/tf_current_mib"
TAG_MEMORY_TF_PEAK = "memory/tf_peak_mib"
TAG_MEMORY_NVML_PROCESS = "memory/nvml_process_mib"
TAG_MEMORY_NVML_DEVICE_USED = "memory/nvml_device_used_mib"

# allreduce/ run: step = message size in MiB
TAG_ALLREDUCE_BUSBW = "allreduce/busbw_GBps"
TAG_ALLREDUCE_ALGBW = "allreduce/algbw_GBps"
TAG_ALLREDUCE_TIME = "allreduce/time_ms"


def scaling_examples_per_s_tag(strategy: str) -> str:
    """scaling/ run, step = device count: median examples/s of ``strategy``."""
    return f"scaling/{strategy}/examples_per_s"


def scaling_efficiency_tag(strategy: str) -> str:
    """scaling/ run, step = device count: throughput(n) / (n x throughput(1))."""
    return f"scaling/{strategy}/efficiency"


# -------------------------------------------------------------- progress marker lines

STEP_MARKER = "GPUDIAG-STEP"
_STEP_LINE = re.compile(rf"^{STEP_MARKER} (\d+) (\d+) (\S+)$")


@dataclass(frozen=True)
class StepProgress:
    """One ``GPUDIAG-STEP`` line: update ``step`` (1-based) of ``total``, its loss."""

    step: int
    total: int
    loss: float  # nan when the loss was not a number


def step_line(step: int, total: int, loss: float) -> str:
    """The line a training child prints after update ``step`` (1-based) of ``total``."""
    return f"{STEP_MARKER} {step} {total} {loss:.4f}"


def parse_step_line(line: str) -> StepProgress | None:
    """``step_line``'s output back; None for any other line."""
    m = _STEP_LINE.match(line.strip())
    if m is None:
        return None
    try:
        loss = float(m.group(3))
    except ValueError:
        return None
    return StepProgress(int(m.group(1)), int(m.group(2)), loss)


def last_step(text: str) -> StepProgress | None:
    """The last progress line in a child's stdout so far (None: none yet)."""
    for line in reversed(text.splitlines()):
        progress = parse_step_line(line)
        if progress is not None:
            return progress
    return None


# ===================================================== multi-worker clusters (cluster/)
# `gpudiag scaling --workers N` and `gpudiag worker`. A scaling run with workers holds,
# per cluster configuration (``cluster_config_name``: mode, worker count, batch per
# worker), one directory ``<config>/`` with one TensorBoard run per task
# (``<config>/<task>/``, ``task_name``: ``worker-0``, ``ps-0``, ``chief-0``) written by
# that task's child, its resume checkpoints under ``<config>/<BACKUP_DIR>/<task>/``, and
# the children's files under ``children/<task_child_name(...)>/``. The parent writes
# the CLUSTER_TB_RUN run: total examples/s against the worker count per mode and batch,
# and the table (TAG_CLUSTER_TABLE). `gpudiag worker` writes ``<task>/`` and, on the
# chief, the combined per-worker scalars (``worker_examples_per_s_tag``).
#
# A cluster task prints ``GPUDIAG-CLUSTER <event> <detail>`` lines on stdout
# (``cluster_line``): ``formed <task>`` once its strategy (or server) is up,
# ``resumed <step>`` after restoring a backup; plus the GPUDIAG-STEP lines above.

CLUSTER_TB_RUN = "cluster"
BACKUP_DIR = "backup"
WORKER_BACKUP_DIR = "worker-backup"  # `gpudiag worker`: <logdir>/worker-backup/<task>/, kept
# across runs (unlike run directories) so that a restarted task resumes; removed when
# a run completes
TAG_CLUSTER_TABLE = "gpudiag/cluster"
TAG_CLUSTER_TOTAL_EXAMPLES_PER_S = "workers/examples_per_s_total"  # chief: summed
CLUSTER_MARKER = "GPUDIAG-CLUSTER"
CLUSTER_FORMED = "formed"
CLUSTER_RESUMED = "resumed"
_CLUSTER_LINE = re.compile(rf"^{CLUSTER_MARKER} (\w+) ?(.*)$")


def cluster_config_name(mode: str, n_workers: int, batch_per_worker: int) -> str:
    """``sync-2w-b32``: one cluster configuration's directory and children's prefix."""
    return f"{mode}-{n_workers}w-b{batch_per_worker}"


def task_name(task_type: str, index: int) -> str:
    """``worker-1``: one task of a cluster (its TensorBoard run inside the config dir)."""
    return f"{task_type}-{index}"


def task_child_name(config: str, task: str, attempt: int = 0) -> str:
    """``sync-2w-b32-worker-1`` (``...-restart1`` for a restarted attempt): a task's
    children/ entry."""
    return f"{config}-{task}" + (f"-restart{attempt}" if attempt else "")


def cluster_examples_per_s_tag(mode: str, batch_per_worker: int) -> str:
    """cluster/ run, step = worker count: examples/s summed over the workers."""
    return f"cluster/{mode}-b{batch_per_worker}/examples_per_s"


def cluster_step_s_tag(mode: str, batch_per_worker: int) -> str:
    """cluster/ run, step = worker count: the median step time of the slowest worker."""
    return f"cluster/{mode}-b{batch_per_worker}/step_s"


def worker_examples_per_s_tag(index: int) -> str:
    """Scalar on the chief's run, step = the last step: worker ``index``'s own examples/s."""
    return f"workers/examples_per_s_{index}"


def cluster_line(event: str, detail: str = "") -> str:
    """The line a cluster task prints for ``event`` (CLUSTER_FORMED, CLUSTER_RESUMED)."""
    return f"{CLUSTER_MARKER} {event} {detail}".rstrip()


def parse_cluster_line(line: str) -> tuple[str, str] | None:
    """``cluster_line``'s output back as (event, detail); None for any other line."""
    m = _CLUSTER_LINE.match(line.strip())
    return (m.group(1), m.group(2)) if m else None


# ---------------------------------------------------------------- run directories


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


def child_path(run_dir: Path, name: str) -> Path:
    """Where one child process's config, result and whole output live (not created)."""
    return run_dir / CHILDREN_DIR / name


def child_dir(run_dir: Path, name: str) -> Path:
    """``child_path``, created."""
    path = child_path(run_dir, name)
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
