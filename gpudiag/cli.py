"""The gpudiag command line. Thin: parse options, call one function per command, render.

Imports no TensorFlow at module level, so ``gpudiag --help`` is instant; TensorFlow only
ever runs in the probes' child processes. Errors are gpudiag's own exception types and
click's usage errors, turned once, in ``main``, into a one-line message and an exit code:
0 all checks passed, 1 a check failed, 2 bad usage or input, 3 environment broken,
130 interrupted (the partial report is still written).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import typer
from rich.console import Console

from gpudiag import __version__
from gpudiag.errors import GpudiagError
from gpudiag.report import render_table
from gpudiag.runner import DEFAULT_TIMEOUT_S
from gpudiag.session import RunSession

EXIT_INTERRUPTED = 130

app = typer.Typer(
    name="gpudiag",
    help="Is TensorFlow really using my GPUs, and if not, why? Probes, findings with "
         "evidence, one TensorBoard logdir.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

LogdirOpt = typer.Option(Path("runs"), "--logdir", help="Directory that receives one run "
                         "directory per command; created if missing, earlier runs untouched.")
JsonOpt = typer.Option(False, "--json", help="Print report.json to stdout (the table goes "
                       "to stderr).")


def positive(value: float | None) -> float | None:
    """Option callback: the value must be > 0 (typer's min= admits 0)."""
    if value is not None and not value > 0:
        raise typer.BadParameter(f"{value:g} is not a positive number")
    return value


TimeoutOpt = typer.Option(DEFAULT_TIMEOUT_S, "--timeout", callback=positive,
                          help="Seconds each probe's child process may run before it is killed.")
VirtualGpusOpt = typer.Option(None, "--virtual-gpus", min=1, max=64, help="Split GPU 0 into "
                              "N logical GPUs (without a GPU: N virtual CPU devices).")
VirtualGpuMemOpt = typer.Option(1024, "--virtual-gpu-memory-mb", min=64, max=1 << 20,
                                help="Memory limit of each logical GPU made by --virtual-gpus.")


def _execute(command: str, logdir: Path, as_json: bool,
             body: Callable[[RunSession, Console], int | None]) -> None:
    """Run one command's body in a session, render the findings, exit with their code
    (or with the code the body returns, e.g. `monitor` forwarding its command's)."""
    console = Console(stderr=as_json)
    try:
        with RunSession(command, logdir) as session:
            console.print(f"[bold]gpudiag {command}[/] -> {session.run_dir}")
            forwarded = body(session, console)
    except KeyboardInterrupt:
        render_table(session.report, console)
        console.print(f"interrupted: the partial report is in {session.run_dir}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    render_table(session.report, console)
    console.print(f"report: {session.run_dir / 'report.md'}")
    console.print(f"TensorBoard: gpudiag tensorboard {session.run_dir.parent}")
    if as_json:
        sys.stdout.write(json.dumps(session.report.to_dict(), indent=2, default=str) + "\n")
    raise typer.Exit(session.report.exit_code() if forwarded is None else forwarded)


@app.command()
def env(
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """What TensorFlow, CUDA, NVML and the devices look like, and the mismatches between them."""
    from gpudiag.commands import env as env_cmd

    def body(session: RunSession, console: Console) -> None:
        with console.status("probing TensorFlow in a child process ..."):
            env_cmd.run(session, timeout_s=timeout)

    _execute("env", logdir, as_json, body)


@app.command()
def placement(
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
    virtual_gpus: int | None = VirtualGpusOpt,
    virtual_gpu_memory_mb: int = VirtualGpuMemOpt,
) -> None:
    """Where every op runs: placement log, pinning, invalid devices, soft placement, towers."""
    from gpudiag.commands import placement as placement_cmd

    def body(session: RunSession, console: Console) -> None:
        with console.status("running the placement probe in a child process ..."):
            placement_cmd.run(session, timeout_s=timeout, virtual_gpus=virtual_gpus,
                              memory_limit_mb=virtual_gpu_memory_mb)

    _execute("placement", logdir, as_json, body)


@app.command()
def scaling(
    max_gpus: int | None = typer.Option(
        None, "--max-gpus", min=1, max=64, help="Train on 1, 2, 4 ... up to this many devices "
        "(default: every GPU; without a GPU, 2 virtual CPU devices). More than exist: exit 2, "
        "unless --virtual-gpus splits GPU 0."),
    strategy: str = typer.Option("towers,mirrored", "--strategy", help="Comma-separated: "
                                 "towers (in-graph replication), mirrored (MirroredStrategy "
                                 "custom loop), keras (model.fit under MirroredStrategy)."),
    model: str = typer.Option("cnn-small", "--model", help="cnn-small, cnn or mlp."),
    batch_per_device: int = typer.Option(32, "--batch-per-device", min=1, max=1 << 16,
                                         help="Examples per device per step."),
    steps: int = typer.Option(100, "--steps", min=1, help="Training steps per configuration."),
    warmup_steps: int = typer.Option(10, "--warmup-steps", min=0,
                                     help="First steps left out of the timing."),
    profile_steps: int = typer.Option(5, "--profile-steps", min=0, max=10, help="Steps traced "
                                      "by the profiler after the warm-up (not timed; 0: none)."),
    learning_rate: float = typer.Option(0.05, "--learning-rate", min=0.0,
                                        help="SGD learning rate."),
    ema_decay: float = typer.Option(0.99, "--ema-decay", help="Decay of the moving average "
                                    "of the weights, in [0, 1); 0 turns it off."),
    histogram_every: int = typer.Option(100, "--histogram-every", min=0, help="Gradient and "
                                        "weight histograms at step 1 and every K steps (0: none)."),
    variables_on: str = typer.Option("cpu", "--variables-on", help="towers: keep the "
                                     "variables on the cpu or on the first device."),
    data: Path | None = typer.Option(None, "--data", help="Keras-style .npz (x_train, "
                                     "y_train) or TFRecord (image_raw bytes, label int64) "
                                     "instead of the synthetic set."),
    allreduce_max_mb: float = typer.Option(256.0, "--allreduce-max-mb", help="Largest "
                                           "all-reduce message in MiB (from 1 MiB, doubling)."),
    allreduce_min_mb: float = typer.Option(1.0, "--allreduce-min-mb",
                                           help="Smallest all-reduce message in MiB."),
    virtual_gpus: int | None = VirtualGpusOpt,
    virtual_gpu_memory_mb: int = VirtualGpuMemOpt,
    timeout: float = typer.Option(300.0, "--timeout", callback=positive,
                                  help="Seconds each configuration's child process may run."),
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Train the probe on 1, 2, 4 ... devices: faster with more devices? did every one work?"""
    from gpudiag.commands import scaling as scaling_cmd

    options = scaling_cmd.ScalingOptions(
        max_gpus=max_gpus, strategies=scaling_cmd.parse_strategies(strategy), model=model,
        batch_per_device=batch_per_device, steps=steps, warmup_steps=warmup_steps,
        profile_steps=profile_steps, learning_rate=learning_rate, ema_decay=ema_decay,
        histogram_every=histogram_every, variables_on=variables_on, data=data,
        virtual_gpus=virtual_gpus, memory_limit_mb=virtual_gpu_memory_mb,
        allreduce_min_mb=allreduce_min_mb, allreduce_max_mb=allreduce_max_mb, timeout_s=timeout,
    )
    scaling_cmd.check(options)

    def body(session: RunSession, console: Console) -> None:
        scaling_cmd.run(session, options, console=console)

    _execute("scaling", logdir, as_json, body)


def _interval(value: float) -> float:
    """Option callback: NVML polls no faster than every 0.1 s."""
    from gpudiag.nvml import MIN_INTERVAL_S

    if not value >= MIN_INTERVAL_S:
        raise typer.BadParameter(f"{value:g} s is too short: at least {MIN_INTERVAL_S:g} s "
                                 "(NVML's utilization window is 1/6 s to 1 s)")
    return value


def _percent(value: float) -> float:
    if not 0 < value <= 100:
        raise typer.BadParameter(f"{value:g} is not a percentage in (0, 100]")
    return value


@app.command(context_settings={"allow_interspersed_args": False})
def monitor(
    command: list[str] | None = typer.Argument(
        None, metavar="-- CMD [ARGS]...", show_default=False,
        help="The command to run and watch (everything after --, or after the first "
             "word that is not a gpudiag option)."),
    interval: float = typer.Option(0.5, "--interval", callback=_interval,
                                   help="Seconds between NVML polls (at least 0.1)."),
    idle_threshold: float = typer.Option(
        10.0, "--idle-threshold", callback=_percent,
        help="A GPU whose p95 utilization stays under this many percent counts as idle."),
    gpus: str | None = typer.Option(None, "--gpus", help="Watch only these GPUs (NVML "
                                    "indices, as nvidia-smi numbers them), e.g. 0,1."),
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run any command (any framework) while sampling every GPU: was every GPU used?"""
    from gpudiag import nvml
    from gpudiag.commands import monitor as monitor_cmd

    argv = monitor_cmd.resolve_command(command or [])
    gpu_list = monitor_cmd.parse_gpus(gpus) if gpus is not None else None
    backend = monitor_cmd.open_nvml()
    try:
        monitor_cmd.check_gpus(gpu_list, backend)
    except GpudiagError:
        if not isinstance(backend, nvml.NvmlUnavailable):
            backend.close()
        raise

    def body(session: RunSession, console: Console) -> int | None:
        return monitor_cmd.run(session, argv, backend=backend, interval_s=interval,
                               idle_threshold_percent=idle_threshold, gpus=gpu_list,
                               stdout_to_stderr=as_json, announce=console.print)

    _execute("monitor", logdir, as_json, body)


@app.command(name="run", context_settings={"allow_interspersed_args": False})
def run_program(
    command: list[str] | None = typer.Argument(
        None, metavar="-- python train.py [ARGS]...", show_default=False,
        help="The program to run, unmodified (python script.py, python -m package, or a "
             "script whose shebang is Python); everything after --."),
    profile_steps: int = typer.Option(5, "--profile-steps", min=0, max=100, help="Steps of "
                                      "the program traced by the profiler (0: none)."),
    profile_warmup: int = typer.Option(10, "--profile-warmup", min=0, max=100_000,
                                       help="Steps of the program before the profiled ones "
                                            "(also left out of the throughput)."),
    placement_log: bool = typer.Option(True, "--placement-log/--no-placement-log",
                                       help="Capture TensorFlow's placement log (kept out "
                                            "of the terminal unless the program asks for it)."),
    interval: float = typer.Option(0.5, "--interval", callback=_interval,
                                   help="Seconds between NVML polls (at least 0.1)."),
    idle_threshold: float = typer.Option(
        10.0, "--idle-threshold", callback=_percent,
        help="A GPU whose p95 utilization stays under this many percent counts as idle."),
    gpus: str | None = typer.Option(None, "--gpus", help="Watch only these GPUs (NVML "
                                    "indices), e.g. 0,1."),
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
) -> None:
    """Run your own TensorFlow program, unmodified, and diagnose it: devices, strategy, where
    its ops ran, learning, throughput, its log and its crash."""
    from gpudiag import nvml
    from gpudiag.commands import monitor as monitor_cmd
    from gpudiag.run import command as run_cmd

    argv = run_cmd.resolve(command or [])
    gpu_list = monitor_cmd.parse_gpus(gpus) if gpus is not None else None
    backend = monitor_cmd.open_nvml()
    try:
        monitor_cmd.check_gpus(gpu_list, backend)
    except GpudiagError:
        if not isinstance(backend, nvml.NvmlUnavailable):
            backend.close()
        raise
    options = run_cmd.RunOptions(interval_s=interval, idle_threshold_percent=idle_threshold,
                                 gpus=gpu_list, profile_warmup_steps=profile_warmup,
                                 profile_steps=profile_steps, placement_log=placement_log)

    def body(session: RunSession, console: Console) -> int | None:
        return run_cmd.run(session, argv, backend=backend, options=options,
                           stdout_to_stderr=as_json, announce=console.print)

    _execute("run", logdir, as_json, body)


def _fraction(value: float | None) -> float | None:
    if value is not None and not 0 < value <= 1:
        raise typer.BadParameter(f"{value:g} is not in (0, 1]: like the old "
                                 "per_process_gpu_memory_fraction, a share of the GPU's memory")
    return value


@app.command()
def memory(
    steps: int = typer.Option(8, "--steps", min=1, max=256,
                              help="Tensors allocated one per step, then released."),
    step_mb: int = typer.Option(64, "--step-mb", min=1, max=1 << 16,
                                help="Size of each step's tensor in MiB."),
    memory_limit_mb: int | None = typer.Option(
        None, "--memory-limit-mb", min=1, max=1 << 22, show_default=False,
        help="The limit mode's memory_limit in MiB [default: 1024]."),
    fraction: float | None = typer.Option(
        None, "--fraction", callback=_fraction, help="The limit as the old "
        "per_process_gpu_memory_fraction, converted to MiB with GPU 0's total memory (NVML)."),
    logdir: Path = LogdirOpt,
    as_json: bool = JsonOpt,
    timeout: float = TimeoutOpt,
) -> None:
    """Memory modes, each in its own process: default, growth, TF_FORCE_GPU_ALLOW_GROWTH,
    a memory limit, and changing them after initialisation. TF's view beside NVML's."""
    from gpudiag.commands import memory as memory_cmd
    from gpudiag.errors import UsageError

    if fraction is not None and memory_limit_mb is not None:
        raise UsageError("give --memory-limit-mb or --fraction, not both")

    def body(session: RunSession, console: Console) -> None:
        memory_cmd.run(session, timeout_s=timeout, steps=steps, step_mb=step_mb,
                       memory_limit_mb=memory_limit_mb, fraction=fraction,
                       announce=console.print)

    _execute("memory", logdir, as_json, body)


@app.command()
def tensorboard(
    logdir: Path = typer.Argument(Path("runs"), help="The logdir to open."),
    port: int = typer.Option(6006, "--port", min=0, max=65535, help="Port (0: any free one)."),
    host: str = typer.Option("localhost", "--host", help="Interface to bind. Only localhost "
                             "unless you ask: 0.0.0.0 exposes TensorBoard to your network."),
) -> None:
    """Open TensorBoard on a gpudiag logdir (bound to localhost unless --host says otherwise)."""
    import os

    from gpudiag.tb import tensorboard_argv

    if not logdir.is_dir():
        raise GpudiagError(f"logdir {logdir} does not exist or is not a directory")
    argv = tensorboard_argv(logdir, port, host)
    typer.echo(f"starting TensorBoard on {logdir}, bound to {host} (Ctrl-C stops it)", err=True)
    os.execv(argv[0], argv)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpudiag {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True,
                                 help="Print the version and exit."),
) -> None:
    """Is TensorFlow really using my GPUs, and if not, why?"""


def _error(message: str, code: int) -> int:
    sys.stderr.write(f"gpudiag: error: {message}\n")
    return code


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code (see module docstring)."""
    command = typer.main.get_command(app)
    try:
        rv = command.main(args=argv, prog_name="gpudiag", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return _error("aborted", EXIT_INTERRUPTED)
    except typer.TyperException as exc:  # usage errors: bad option values, unknown options
        return _error(" ".join(exc.format_message().split()), getattr(exc, "exit_code", 2))
    except GpudiagError as exc:
        return _error(exc.message, exc.exit_code)
    except KeyboardInterrupt:
        return _error("interrupted; the partial report is in the run directory",
                      EXIT_INTERRUPTED)
    return int(rv or 0)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
