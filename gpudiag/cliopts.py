"""The command line's shared options and the checks on their values (gpudiag.cli uses them).

Every check turns a value that would pass a type check but hang, overflow or poison
report.json (inf, nan, 1e-9 MiB, an empty --logdir) into typer.BadParameter: one line,
exit 2, before anything is created.
"""

from __future__ import annotations

import math
from pathlib import Path

import typer

from gpudiag.devices import DEFAULT_VIRTUAL_GPU_MEMORY_MB
from gpudiag.nvml.sampler import MIN_INTERVAL_S
from gpudiag.probes.records import MAX_PROFILE_STEPS, Workload
from gpudiag.run.config import DEFAULT_PROFILE_STEPS, DEFAULT_PROFILE_WARMUP_STEPS
from gpudiag.runner import DEFAULT_TIMEOUT_S


def logdir_path(value: str | Path) -> Path:
    """Option parser for --logdir: checked before anything is created (layout.check_logdir
    does the rest: a file in the way, no permission). Typer 0.29 passes the default through
    the parser too, already a Path."""
    text = str(value) if isinstance(value, Path) else value
    if not text.strip():
        raise typer.BadParameter("is empty; name a directory (default: runs)")
    return Path(text)


LogdirOpt = typer.Option(Path("runs"), "--logdir", parser=logdir_path,
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


TimeoutOpt = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", callback=positive,
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
IntervalOpt = typer.Option(0.5, "--interval", callback=interval,
                           help="Seconds between NVML polls (at least 0.1).")
IdleThresholdOpt = typer.Option(
    10.0, "--idle-threshold", callback=percent,
    help="A GPU whose p95 utilization stays under this many percent counts as idle.")
GpusOpt = typer.Option(None, "--gpus", help="Watch only these GPUs (NVML indices, as "
                       "nvidia-smi numbers them), e.g. 0,1.")


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
