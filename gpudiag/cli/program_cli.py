"""The command line's commands that run the user's own command: `monitor` (any command,
every GPU sampled), `run` (a TensorFlow program, diagnosed) and `try` (the advised fixes
measured on it). Registered on gpudiag.cli's app in its place among the commands.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from gpudiag import cliopts as opt
from gpudiag.execute import execute, nvml_for
from gpudiag.session import RunSession
from gpudiag.ui import Ui

if TYPE_CHECKING:
    from gpudiag.nvml import NvmlBackend, NvmlUnavailable

    Backend = NvmlBackend | NvmlUnavailable

commands = typer.Typer()

Body = Callable[[RunSession, Ui], int | None]  # a command's body in its session


@commands.command(context_settings={"allow_interspersed_args": False},
                  short_help="Run any command, sampling every GPU: was each used?")
def monitor(
    ctx: typer.Context,
    command: list[str] | None = typer.Argument(
        None, metavar="-- CMD [ARGS]...", show_default=False,
        help="The command to run and watch (everything after --, or after the first "
             "word that is not a gpudiag option)."),
    interval_s: float = opt.IntervalOpt,
    idle_threshold: float = opt.IdleThresholdOpt,
    gpus: str | None = opt.GpusOpt,
    strict: bool = opt.StrictOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Run any command (any framework) while sampling every GPU: was every GPU used?
    Exits with the command's own exit code (--strict: 1 when a check failed)."""
    from gpudiag.commands import monitor as monitor_cmd
    from gpudiag.procs.command import resolve_command

    argv = resolve_command(command or [])

    def body(backend: Backend, gpu_list: tuple[int, ...] | None) -> Body:
        options = monitor_cmd.MonitorOptions(
            argv, interval_s=interval_s, idle_threshold_percent=idle_threshold, gpus=gpu_list,
            stdout_to_stderr=as_json)
        return lambda session, ui: monitor_cmd.run(session, options, backend=backend, ui=ui)

    _watch(ctx, "monitor", gpus, logdir, as_json, body, strict=strict)


@commands.command(name="run", context_settings={"allow_interspersed_args": False},
                  short_help="Run your own TensorFlow program and diagnose it.")
def run_program(
    ctx: typer.Context,
    command: list[str] | None = typer.Argument(
        None, metavar="-- python train.py [ARGS]...", show_default=False,
        help="The program to run, unmodified (python script.py, python -m package, or a "
             "script whose shebang is Python); everything after --."),
    profile_steps: int = opt.RunProfileStepsOpt,
    profile_warmup: int = opt.RunProfileWarmupOpt,
    placement_log: bool = opt.PlacementLogOpt,
    stall_timeout: float | None = opt.StallTimeoutOpt,
    quiet: bool = opt.QuietOpt,
    grace: float = opt.GraceOpt,
    interval_s: float = opt.IntervalOpt,
    idle_threshold: float = opt.IdleThresholdOpt,
    gpus: str | None = opt.GpusOpt,
    strict: bool = opt.StrictOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Run your own TensorFlow program, unmodified, and diagnose it: devices, strategy, where
    its ops ran, learning, throughput, its log and its crash. Exits with the program's own
    exit code (--strict: 1 when a check failed)."""
    from gpudiag.commands import run as run_cmd
    from gpudiag.run.options import RunOptions

    argv = run_cmd.resolve(command or [])

    def body(backend: Backend, gpu_list: tuple[int, ...] | None) -> Body:
        options = RunOptions(interval_s=interval_s, idle_threshold_percent=idle_threshold,
                             gpus=gpu_list, profile_warmup_steps=profile_warmup,
                             profile_steps=profile_steps, placement_log=placement_log,
                             stall_timeout_s=stall_timeout, quiet=quiet, grace_s=grace)
        return lambda session, ui: run_cmd.run(session, argv, backend=backend,
                                               options=options, stdout_to_stderr=as_json,
                                               ui=ui)

    _watch(ctx, "run", gpus, logdir, as_json, body, strict=strict)


@commands.command(name="try", context_settings={"allow_interspersed_args": False},
                  short_help="Measure the advised fixes on your own program, unedited.")
def try_fixes(
    ctx: typer.Context,
    command: list[str] | None = typer.Argument(
        None, metavar="-- python train.py [ARGS]...", show_default=False,
        help="The program, as for gpudiag run; everything after --."),
    rounds: int = typer.Option(3, "--rounds", min=1, max=20,
                               help="Rounds of trials: the program as written and each fix, "
                                    "interleaved (A B C A B C ...)."),
    steps: int = typer.Option(100, "--steps", min=0, max=1_000_000,
                              help="Measured steps a trial's fit runs after its 10 warm-up "
                                   "steps before it stops (0: each trial runs to its end)."),
    from_dir: Path | None = typer.Option(
        None, "--from", metavar="RUN_DIR", exists=True, file_okay=False,
        help="Take the fixes from this earlier `gpudiag run` of the same command instead of "
             "diagnosing again."),
    only: list[str] | None = typer.Option(
        None, "--fix", metavar="NAME",
        help="Try only this fix (repeatable): parallel-map, prefetch, cache, deterministic, "
             "steps-per-execution, steps-per-execution-larger, jit-compile, "
             "reduce-retracing."),
    dry_run: bool = typer.Option(False, "--dry-run",
                                 help="Diagnose and print the trials, the time they would "
                                      "take and the fixes; run no trial."),
    grace: float = opt.GraceOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Run your program as written (the diagnosis, as gpudiag run), then again with each
    fix it advises that gpudiag can apply in-process at your line (never editing a file),
    interleaved in rounds, and measure each fix's step time against the program as written.
    The program runs once per trial: its side effects happen each time. Exits with the
    diagnosis run's exit code."""
    from gpudiag.commands import run as run_cmd
    from gpudiag.commands import tryfixes
    from gpudiag.run.options import RunOptions

    argv = run_cmd.resolve(command or [], name="try")
    tryfixes.check_single_process()
    unknown = sorted(set(only or ()) - set(tryfixes.BY_NAME))
    if unknown:
        raise typer.BadParameter(f"no such fix: {', '.join(unknown)} (known: "
                                 f"{', '.join(tryfixes.BY_NAME)})", param_hint="--fix")
    options = tryfixes.TryOptions(rounds=rounds, steps=steps or None, from_dir=from_dir,
                                  dry_run=dry_run, only=tuple(only or ()),
                                  stdout_to_stderr=as_json, run=RunOptions(grace_s=grace))

    def body(backend: Backend, gpu_list: tuple[int, ...] | None) -> Body:
        return lambda session, ui: tryfixes.run(session, argv, backend=backend,
                                                options=options, ui=ui)

    _watch(ctx, "try", None, logdir, as_json, body, strict=False)


def _watch(ctx: typer.Context, name: str, gpus: str | None, logdir: Path, as_json: bool,
           body: Callable[[Backend, tuple[int, ...] | None], Body], *,
           strict: bool) -> None:
    """`monitor` and `run`: --gpus checked against NVML (opened before the run directory
    exists), then the command's body in its session; the exit code is the command's
    (``strict``: 1 when a check failed and the command exited 0)."""
    gpu_list = opt.parse_gpus(gpus) if gpus is not None else None
    with nvml_for(ctx) as backend:
        opt.check_gpus(gpu_list, backend)
        execute(name, logdir, as_json, body(backend, gpu_list), watches_a_command=True,
                strict=strict)
