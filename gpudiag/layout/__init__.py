"""The format contract: what gpudiag writes on disk, and under which names.

This module holds the run directory's names; run.py `gpudiag run`'s, events.py the event
protocol of `gpudiag run`'s events-<pid>.jsonl (a typed record per kind and its encoder;
loopevents.py the training loops' kinds, eventdecode.py its decoder), cluster.py the
clusters', views.py the TensorBoard views' tags and HParams, diff.py `gpudiag diff`'s
record (report.json's data.diff), trial.py `gpudiag try`'s run directory (the baseline's
and each trial's runs), names.py Indexed (a name with one slot), families.py the finding
families (report.json's finding ids, the question each answers), evidence.py their typed
evidence records (compared.py those of the findings that compare, evidencefields.py the
checked reading of a field), units.py how durations and shares are written and the
intervals' level.

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
    report.md            the same report for people, the terminal's verdict first
    report/              TensorBoard run: the short verdict (TAG_VERDICT, the Text tab's
                         first card), the findings at a glance (TAG_FINDINGS), each
                         finding's evidence (TAG_REPORT), per
                         command its tables (TAG_PLACEMENT, TAG_MEMORY, TAG_MONITOR,
                         TAG_SCALING_TABLE, TAG_ALLREDUCE_TABLE) and plots
                         (TAG_SCALING_PLOT, TAG_ALLREDUCE_PLOT), the Custom Scalars layout
                         (gpudiag/tb/views.py) and, for scaling, the HParams experiment
    children/<name>/     per child process: config.json (what the parent asked),
                         result.json (``{"ok": ..., "result" | "error" ...}``), stdout.txt,
                         stderr.txt (the whole of the child's output, kept as evidence)
    nvml/                TensorBoard run (monitor): per-GPU NVML scalars, ``gpu_tag``
    memory-<mode>/       TensorBoard run per memory mode (memory): TAG_MEMORY_* scalars
    <strategy>-<n>dev/   TensorBoard run per scaling configuration (``config_run_name``),
                         written by the training child with tf.summary: the TAG_TRAIN_*,
                         tower or replica, norm, histogram and TAG_EVAL_* tags below,
                         ``checkpoints/`` (CHECKPOINT_DIR) and the profiler trace
                         ``plugins/profile/<ts>/<host>.xplane.pb`` (steps marked
                         PROFILER_STEP_MARKER; each tower's ops under ``tower_scope(i)``,
                         the averaging under AVERAGE_GRADIENTS_SCOPE); a ``keras`` run's
                         Keras callback writes its own tags under ``train/`` (KERAS_TRAIN_RUN);
                         and by the parent, after the verdicts: the configuration's figures
                         (BY_CONFIG tags, a level line over the steps) and its HParams session
    nvml/<config>/       (scaling) NVML scalars sampled while that configuration ran
    scaling.png          the scaling plot (PLOT_PNG): examples/s and efficiency against
                         the device count, towers and mirrored together
    allreduce.png        bus and algorithm bandwidth against the message size (ALLREDUCE_PNG)
    breakdown.png        (run, explain, scaling: with a trace) each device's mean profiled
                         step, stacked by where its time went (BREAKDOWN_PNG; also the
                         report run's TAG_BREAKDOWN_PLOT; TAG_BOTTLENECK: the finding first)

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
from gpudiag.layout.names import Indexed

SCHEMA_VERSION = 2  # 2: findings carry title, question and actions (1 still loads)

# --------------------------------------------------------------------- run directory

REPORT_JSON = "report.json"
REPORT_MD = "report.md"
REPORT_TB_RUN = "report"
CHILDREN_DIR = "children"
NVML_TB_RUN = "nvml"
PLOT_PNG = "scaling.png"
MEMORY_TB_RUN_PREFIX = "memory-"
CHECKPOINT_DIR = "checkpoints"  # inside a configuration's run: tf.train.CheckpointManager
KERAS_TRAIN_RUN = "train"  # inside a keras configuration's run: Keras's TensorBoard callback
TB_EVENTS_GLOB = "events.out.tfevents.*"  # a TensorBoard run's event files
XPLANE_SUFFIX = ".xplane.pb"  # a profiler trace, under <run>/plugins/profile/<ts>/
# The commands whose run directories gpudiag writes (report.json's "command").
COMMANDS = ("env", "placement", "memory", "scaling", "monitor", "run", "explain", "worker",
            "diff", "try")

# Files of one child process, in children/<name>/
CONFIG_JSON = "config.json"
RESULT_JSON = "result.json"
STDOUT_TXT = "stdout.txt"
STDERR_TXT = "stderr.txt"


def config_run_name(strategy: str, n_devices: int) -> str:
    """``towers-4dev``: a scaling configuration's TensorBoard run."""
    return f"{strategy}-{n_devices}dev"


def count_child_name(n_devices: int) -> str:
    """``scaling-4dev``: the child of `gpudiag scaling` that runs every strategy on that
    many devices (and, the largest count's, the all-reduce sweep)."""
    return f"scaling-{n_devices}dev"


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
TAG_EXPLAIN = "gpudiag/explain"  # text: `gpudiag explain`'s breakdown, a row per device

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


#: The name scope of tower (replica) <i>'s ops.
tower_scope = Indexed("tower_{}")


# gpudiag's profiler step marker in an xplane.pb
# (tf.profiler.experimental.Trace(PROFILER_STEP_MARKER, step_num=...)); the markers of
# TensorFlow and Keras that gpudiag reads are gpudiag.readers.traces.STEP_MARKERS.
PROFILER_STEP_MARKER = "train"


#: Scalar, every step: the loss of tower (replica) <i>'s slice of the batch.
tower_loss_tag = Indexed("towers/loss_{}")


#: Histogram: the gradient of a parameter averaged over the towers.
gradient_tag = Indexed("gradients/{}")


#: Histogram: the weights of a parameter after the update.
variable_tag = Indexed("variables/{}")


# ------------------------------------------------------------------- parent scalars


#: NVML utilization (nvidia-smi's utilization.gpu) of GPU <i>, percent.
gpu_util_tag = Indexed("gpu{}/util_percent")


#: The driver's finer utilization samples (nvmlDeviceGetSamples), percent.
gpu_util_driver_tag = Indexed("gpu{}/util_driver_percent")


#: Device memory in use on GPU <i>, MiB.
gpu_memory_used_tag = Indexed("gpu{}/memory_used_mib")


#: Power draw of GPU <i>, watts.
gpu_power_tag = Indexed("gpu{}/power_w")


# GPM (GPU performance monitoring, Hopper and later), each over the period since the
# previous reading: how much of the GPU the kernels used while NVML's utilization says
# "a kernel ran".
#: Share of the SMs that were busy on GPU <i> (NVML_GPM_METRIC_SM_UTIL), percent.
gpu_sm_util_tag = Indexed("gpu{}/gpm_sm_util_percent")


#: Active warps against the SMs' maximum (NVML_GPM_METRIC_SM_OCCUPANCY), percent.
gpu_sm_occupancy_tag = Indexed("gpu{}/gpm_sm_occupancy_percent")


#: Time the SMs ran any tensor-core op (NVML_GPM_METRIC_ANY_TENSOR_UTIL), percent.
gpu_tensor_util_tag = Indexed("gpu{}/gpm_tensor_util_percent")


#: DRAM bandwidth used against its maximum (NVML_GPM_METRIC_DRAM_BW_UTIL), percent.
gpu_dram_bw_util_tag = Indexed("gpu{}/gpm_dram_bw_util_percent")


# memory-<mode>/ runs: TensorFlow's and NVML's view per allocation step (MiB)
TAG_MEMORY_TF_CURRENT = "memory/tf_current_mib"
TAG_MEMORY_TF_PEAK = "memory/tf_peak_mib"
TAG_MEMORY_NVML_PROCESS = "memory/nvml_process_mib"
TAG_MEMORY_NVML_DEVICE_USED = "memory/nvml_device_used_mib"


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


_RUN_DIR_NAME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d)-[a-z][a-z0-9_-]*?(?:-(\d+))?$")


def newest_run_dir(logdir: Path) -> Path | None:
    """The newest run directory directly under ``logdir`` (``new_run_dir``'s names: by
    timestamp, then by the ``-2``, ``-3`` ... suffix); None when there is none."""
    if not logdir.is_dir():
        return None
    found = []
    for p in logdir.iterdir():
        m = _RUN_DIR_NAME.match(p.name)
        if m and p.is_dir() and (p / REPORT_JSON).exists():
            found.append((m.group(1), int(m.group(2) or 1), p))
    return max(found)[2] if found else None


def child_path(run_dir: Path, name: str) -> Path:
    """Where one child process's config, result and whole output live (not created)."""
    return run_dir / CHILDREN_DIR / name


def child_dir(run_dir: Path, name: str) -> Path:
    """``child_path``, created."""
    path = child_path(run_dir, name)
    path.mkdir(parents=True, exist_ok=True)
    return path


# The sections of other commands live beside this module and are part of the contract:
# everything they define is reachable as gpudiag.layout.NAME.
from gpudiag.layout.cluster import *  # noqa: E402, F403
from gpudiag.layout.diff import *  # noqa: E402, F403
from gpudiag.layout.run import *  # noqa: E402, F403
from gpudiag.layout.trial import *  # noqa: E402, F403
from gpudiag.layout.views import *  # noqa: E402, F403
