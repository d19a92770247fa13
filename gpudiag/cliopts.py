"""The command line's shared options and the checks on their values (gpudiag.cli uses them).

Every check turns a value that would pass a type check but hang, overflow or poison
report.json (inf, nan, 1e-9 MiB, an empty --logdir) into typer.BadParameter: one line,
exit 2, before anything is created.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

import typer

from gpudiag import nvml
from gpudiag.errors import UsageError
from gpudiag.inprogram.config import DEFAULT_PROFILE_STEPS, DEFAULT_PROFILE_WARMUP_STEPS
from gpudiag.nvml.sampler import MIN_INTERVAL_S
from gpudiag.procs.runner import DEFAULT_TIMEOUT_S
from gpudiag.records.devices import DEFAULT_VIRTUAL_GPU_MEMORY_MB
from gpudiag.records.results import MemoryConfig
from gpudiag.records.training import MAX_PROFILE_STEPS, Workload
from gpudiag.scaling.options import ScalingOptions


def logdir_path(value: str | Path) -> Path:
    """Option parser for --logdir: checked before anything is created (layout.check_logdir
    does the rest: a file in the way, no permission). Typer 0.29 passes the default through
    the parser too, already a Path."""
    text = str(value) if isinstance(value, Path) else value
    if not text.strip():
        raise typer.BadParameter("is empty; name a directory (default: runs)")
    return Path(text)


LogdirOpt = typer.Option(Path("runs"), "--logdir", parser=logdir_path, metavar="DIR",
                         help="Directory that receives one run directory per command; "
                         "created if missing, earlier runs untouched.")
JsonOpt = typer.Option(False, "--json", help="Print report.json to stdout (the table goes "
                       "to stderr).")


def positive(value: float | None) -> float | None:
    """Option callback: the value must be a finite number > 0 (typer's min= admits 0,
    and inf or 1e400 would end up as Infinity in report.json)."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise typer.BadParameter(f"{value:g} is not a positive finite number")
    return value


def finite_nonnegative(value: float) -> float:
    if not (math.isfinite(value) and value >= 0):
        raise typer.BadParameter(f"{value:g} is not a finite number >= 0")
    return value


#: All-reduce message sizes the probe accepts, in MiB: 1 KiB to 16 GiB (at most 25 sizes).
ALLREDUCE_MB_RANGE = (1 / 1024, 16384.0)


def allreduce_mb(value: float) -> float:
    low, high = ALLREDUCE_MB_RANGE
    if not (math.isfinite(value) and low <= value <= high):
        raise typer.BadParameter(f"{value:g} MiB is outside {low:g} .. {high:g} MiB "
                                 "(1 KiB to 16 GiB)")
    return value


TimeoutOpt = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", callback=positive, metavar="SECONDS",
                          help="Seconds each probe's child process may run before it is killed.")
VirtualGpusOpt = typer.Option(None, "--virtual-gpus", min=1, max=64, help="Split GPU 0 into "
                              "N logical GPUs (without a GPU: N virtual CPU devices).")
VirtualGpuMemOpt = typer.Option(DEFAULT_VIRTUAL_GPU_MEMORY_MB, "--virtual-gpu-memory-mb",
                                min=64, max=1 << 20,
                                help="Memory limit of each logical GPU made by --virtual-gpus.")


def interval(value: float) -> float:
    """Option callback: NVML polls no faster than every 0.1 s."""
    if not value >= MIN_INTERVAL_S:
        raise typer.BadParameter(f"{value:g} s is too short: at least {MIN_INTERVAL_S:g} s "
                                 "(NVML's utilization window is 1/6 s to 1 s)")
    if not value <= MAX_INTERVAL_S:
        raise typer.BadParameter(f"{value:g} s is too long: at most {MAX_INTERVAL_S:g} s "
                                 "(one sample an hour)")
    return value


MAX_INTERVAL_S = 3600.0


def percent(value: float) -> float:
    if not 0 < value <= 100:
        raise typer.BadParameter(f"{value:g} is not a percentage in (0, 100]")
    return value


def fraction(value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise typer.BadParameter(f"{value:g} is not in (0, 1]: like the old "
                                 "per_process_gpu_memory_fraction, a share of the GPU's memory")
    return value


# `monitor` and `run`: how NVML watches the GPUs while the command runs.
IntervalOpt = typer.Option(0.5, "--interval", callback=interval, metavar="SECONDS",
                           help="Seconds between NVML polls (at least 0.1).")
IdleThresholdOpt = typer.Option(
    10.0, "--idle-threshold", callback=percent,
    help="A GPU whose p95 utilization stays under this many percent counts as idle.")
GpusOpt = typer.Option(None, "--gpus", metavar="INDICES", help="Watch only these GPUs "
                       "(NVML indices, as nvidia-smi numbers them), e.g. 0,1.")


def parse_gpus(text: str) -> tuple[int, ...]:
    """``--gpus 0,2`` -> (0, 2): NVML device indices, as nvidia-smi numbers them."""
    out: list[int] = []
    for part in text.split(","):
        token = part.strip()
        if not token.isdigit():
            raise UsageError(
                f"--gpus {text!r}: expected GPU indices separated by commas, such as 0,1"
            )
        if int(token) not in out:
            out.append(int(token))
    return tuple(out)


def check_gpus(
    gpus: Sequence[int] | None, backend: nvml.NvmlBackend | nvml.NvmlUnavailable
) -> None:
    """UsageError when ``--gpus`` names a GPU NVML does not have (unchecked without NVML)."""
    if gpus is None or isinstance(backend, nvml.NvmlUnavailable):
        return
    try:
        count = backend.device_count()
    except nvml.DeviceError:
        return  # NVML is failing as a whole: the command reports it, --gpus cannot be checked
    bad = [i for i in gpus if i >= count]
    if bad:
        listing = "0" if count == 1 else f"0..{count - 1}"
        raise UsageError(f"--gpus {bad[0]}: there are {count} GPU(s) (indices {listing})")


# `scaling` and `worker`: the probe training's workload (defaults: probes.records.Workload).
_WORKLOAD = Workload()
ModelOpt = typer.Option(_WORKLOAD.model, "--model", help="cnn-small, cnn or mlp.")
BatchPerDeviceOpt = typer.Option(_WORKLOAD.batch_per_device, "--batch-per-device", min=1,
                                 max=1 << 16, help="Examples per device (replica) per step.")
StepsOpt = typer.Option(_WORKLOAD.steps, "--steps", min=1,
                        help="Training steps per configuration.")
WarmupStepsOpt = typer.Option(_WORKLOAD.warmup_steps, "--warmup-steps", min=0,
                              help="First steps left out of the timing.")
ProfileStepsOpt = typer.Option(_WORKLOAD.profile_steps, "--profile-steps", min=0,
                               max=MAX_PROFILE_STEPS, help="Steps traced by the profiler "
                               "after the warm-up (not timed; 0: none).")


# `run`: the profiler window over the program's own steps, and the placement log.
RunProfileStepsOpt = typer.Option(
    DEFAULT_PROFILE_STEPS, "--profile-steps", min=0, max=100,
    help="Steps of the program traced by the profiler (0: none).")
RunProfileWarmupOpt = typer.Option(
    DEFAULT_PROFILE_WARMUP_STEPS, "--profile-warmup", min=0, max=100_000,
    help="Steps of the program before the profiled ones (also left out of the throughput).")
PlacementLogOpt = typer.Option(True, "--placement-log/--no-placement-log",
                               help="Record where TensorFlow placed the program's ops, in "
                               "bounded windows (its run metadata over the first steps of "
                               "each loop; nothing per op afterwards).")

# `scaling`: its own options (defaults: scaling.options.ScalingOptions and Workload).
_SCALING = ScalingOptions()
MaxGpusOpt = typer.Option(
    _SCALING.max_gpus, "--max-gpus", min=1, max=64, help="Train on 1, 2, 4 ... up to this "
    "many devices (default: every GPU; without a GPU, 2 virtual CPU devices). More than "
    "exist: exit 2, unless --virtual-gpus splits GPU 0.")
StrategyOpt = typer.Option(
    ",".join(_SCALING.strategies), "--strategy", help="Comma-separated: towers (in-graph "
    "replication), mirrored (MirroredStrategy custom loop), keras (model.fit under "
    "MirroredStrategy).")
LearningRateOpt = typer.Option(_WORKLOAD.learning_rate, "--learning-rate",
                               callback=finite_nonnegative, help="SGD learning rate.")
EmaDecayOpt = typer.Option(_WORKLOAD.ema_decay, "--ema-decay", help="Decay of the moving "
                           "average of the weights, in [0, 1); 0 turns it off.")
HistogramEveryOpt = typer.Option(_WORKLOAD.histogram_every, "--histogram-every", min=0,
                                 help="Gradient and weight histograms at step 1 and every K "
                                 "steps (0: none).")
VariablesOnOpt = typer.Option(_WORKLOAD.variables_on, "--variables-on", help="towers: keep "
                              "the variables on the cpu or on the first device.")
DataOpt = typer.Option(None, "--data", help="Keras-style .npz (x_train, y_train) or TFRecord "
                       "(image_raw bytes, label int64) instead of the synthetic set.")
AllreduceMaxOpt = typer.Option(_SCALING.allreduce_max_mb, "--allreduce-max-mb",
                               callback=allreduce_mb, help="Largest all-reduce message in MiB "
                               "(from --allreduce-min-mb, doubling; at most 16384).")
AllreduceMinOpt = typer.Option(_SCALING.allreduce_min_mb, "--allreduce-min-mb",
                               callback=allreduce_mb, help="Smallest all-reduce message in "
                               "MiB (at least 1/1024, 1 KiB).")
ScalingTimeoutOpt = typer.Option(_SCALING.timeout_s, "--timeout", callback=positive,
                                 metavar="SECONDS",
                                 help="Seconds each configuration's child process may run.")

# `run`: the stall watch.
StallTimeoutOpt = typer.Option(
    None, "--stall-timeout", min=0.0, show_default=False, metavar="SECONDS",
    help="Seconds without a finished step before gpudiag names the job stalled and where "
         "it waits (default: 20x the median step period, at least 60 s; before a "
         "multi-worker task's first step, 300 s from its join; 0: off).")
QuietOpt = typer.Option(
    False, "--quiet", help="No status line (step, loss, examples/s, GPU utilization) at "
    "the bottom of the terminal while the program runs; live findings and the report are "
    "still shown. Without a terminal on stderr there is none anyway.")

StrictOpt = typer.Option(
    False, "--strict", help="Exit 1 when a check failed although the program exited 0, "
    "for gpudiag as a gate in CI. Without it gpudiag exits with the program's own code, "
    "whatever the findings.")

GraceOpt = typer.Option(
    30.0, "--grace", min=0.0, max=86400.0, callback=finite_nonnegative, metavar="SECONDS",
    help="Seconds the program has to end by itself after gpudiag passes it a SIGTERM or "
         "Ctrl-C, before SIGKILL (a second Ctrl-C ends it at once). A SIGHUP is passed on "
         "and the program runs on if it ignores it (nohup).")

# `memory`: its allocation steps and the limit mode (defaults: probes.results.MemoryConfig).
MemoryStepsOpt = typer.Option(MemoryConfig.steps, "--steps", min=1, max=256,
                              help="Tensors allocated one per step, then released.")
MemoryStepMbOpt = typer.Option(MemoryConfig.step_mb, "--step-mb", min=1, max=1 << 16,
                               help="Size of each step's tensor in MiB.")
MemoryLimitOpt = typer.Option(None, "--memory-limit-mb", min=1, max=1 << 22,
                              show_default=False,
                              help="The limit mode's memory_limit in MiB [default: 1024].")
MemoryFractionOpt = typer.Option(
    None, "--fraction", callback=fraction, help="The limit as the old "
    "per_process_gpu_memory_fraction, converted to MiB with GPU 0's total memory (NVML).")

# `tensorboard`: where it listens, and --check.
PortOpt = typer.Option(6006, "--port", min=0, max=65535, help="Port (0: any free one).")
HostOpt = typer.Option("localhost", "--host", help="Interface to bind. Only localhost unless "
                       "you ask: 0.0.0.0 exposes TensorBoard to your network.")
CheckOpt = typer.Option(False, "--check", help="Start it, check over HTTP that every dashboard "
                        "lists the expected runs, print that, stop; exit 0 when all pass, 1 "
                        "otherwise.")
