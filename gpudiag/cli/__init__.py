"""The gpudiag command line. Thin: parse options, call one function per command, render.

Imports no TensorFlow at module level, so ``gpudiag --help`` is instant; TensorFlow only
ever runs in the probes' child processes. Errors are gpudiag's own exception types and
click's usage errors, turned once, in ``main``, into a one-line message and an exit code:
0 all checks passed, 1 a check failed, 2 bad usage or input, 3 environment broken,
130 interrupted (the partial report is still written).

NVML is opened here, at the edge, for each command that needs it (``_nvml``: a ``with``
block, so the code that opens it closes it) and passed into the command function as
``backend``. ``main(argv, open_nvml=...)`` is the one seam that replaces the real opener
(gpudiag.nvml.open_backend) with another, e.g. a test's scripted fake backend; it reaches
the commands as the click context's ``obj``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpudiag import __version__
from gpudiag import cliopts as opt
from gpudiag.cluster import options as cluster_opts
from gpudiag.execute import (
    EXIT_INTERRUPTED,
    execute,
    exit_code_of,
    install_signal_handlers,
    interrupted_exit,
)
from gpudiag.procs import stdstreams
from gpudiag.records.training import Workload
from gpudiag.rundir.confine import MAX_TRACE_MB, MiB
from gpudiag.scaling.options import ScalingOptions
from gpudiag.session import RunSession
from gpudiag.ui import Ui

if TYPE_CHECKING:
    from gpudiag.nvml import NvmlBackend, NvmlUnavailable, Opener

    Backend = NvmlBackend | NvmlUnavailable

Body = Callable[[RunSession, Ui], int | None]  # a command's body in its session


app = typer.Typer(
    name="gpudiag",
    help="Is TensorFlow really using my GPUs, and if not, why? Probes, findings with "
         "evidence, one TensorBoard logdir.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # click's own help layout: it gives the words the room at 80 columns (rich's panels
    # squeezed them into a 19-character column beside a <bool> metavar column)
    rich_markup_mode=None,
)

def _nvml(ctx: typer.Context) -> AbstractContextManager[NvmlBackend | NvmlUnavailable]:
    """NVML for one command: opened with the opener ``main`` was given (the real one by
    default) when the ``with`` block starts, closed when it ends."""
    from gpudiag import nvml

    opener: Opener | None = ctx.obj
    return nvml.opened(opener)


@app.command(short_help="What TensorFlow, CUDA, NVML and the devices look like.")
def env(
    ctx: typer.Context,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    timeout: float = opt.TimeoutOpt,
) -> None:
    """What TensorFlow, CUDA, NVML and the devices look like, and the mismatches between them."""
    from gpudiag.commands import env as env_cmd

    def body(session: RunSession, ui: Ui) -> None:
        with _nvml(ctx) as backend:
            env_cmd.run(session, backend=backend, timeout_s=timeout, ui=ui)

    execute("env", logdir, as_json, body)


@app.command(short_help="Where every op runs; soft-placement fallbacks.")
def placement(
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    timeout: float = opt.TimeoutOpt,
    virtual_gpus: int | None = opt.VirtualGpusOpt,
    virtual_gpu_memory_mb: int = opt.VirtualGpuMemOpt,
) -> None:
    """Where every op runs: placement log, pinning, invalid devices, soft placement, towers."""
    from gpudiag.commands import placement as placement_cmd

    def body(session: RunSession, ui: Ui) -> None:
        placement_cmd.run(session, timeout_s=timeout, virtual_gpus=virtual_gpus,
                          memory_limit_mb=virtual_gpu_memory_mb, ui=ui)

    execute("placement", logdir, as_json, body)


@app.command(short_help="Train on 1, 2, 4 ... devices: faster with more?")
def scaling(
    ctx: typer.Context,
    max_gpus: int | None = opt.MaxGpusOpt,
    strategy: str = opt.StrategyOpt,
    model: str = opt.ModelOpt,
    batch_per_device: int = opt.BatchPerDeviceOpt,
    steps: int = opt.StepsOpt,
    warmup_steps: int = opt.WarmupStepsOpt,
    profile_steps: int = opt.ProfileStepsOpt,
    learning_rate: float = opt.LearningRateOpt,
    ema_decay: float = opt.EmaDecayOpt,
    histogram_every: int = opt.HistogramEveryOpt,
    variables_on: str = opt.VariablesOnOpt,
    data: Path | None = opt.DataOpt,
    allreduce_max_mb: float = opt.AllreduceMaxOpt,
    allreduce_min_mb: float = opt.AllreduceMinOpt,
    virtual_gpus: int | None = opt.VirtualGpusOpt,
    virtual_gpu_memory_mb: int = opt.VirtualGpuMemOpt,
    timeout: float = opt.ScalingTimeoutOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    workers: int | None = cluster_opts.WorkersOpt,
    mode: str | None = cluster_opts.ModeOpt,
    batch_factor: int = cluster_opts.BatchFactorOpt,
    restarts: int = cluster_opts.RestartsOpt,
    fault: str | None = cluster_opts.FaultOpt,
    form_timeout: float = cluster_opts.FormTimeoutOpt,
    collective_timeout: float = cluster_opts.CollectiveTimeoutOpt,
) -> None:
    """Train the probe on 1, 2, 4 ... devices: faster with more devices? did every one work?
    With --workers N: on a local cluster of 1, then N, TensorFlow worker processes."""
    from gpudiag.commands import scaling as scaling_cmd
    from gpudiag.scaling.options import check, parse_strategies

    workload = Workload(
        model=model, batch_per_device=batch_per_device, steps=steps, warmup_steps=warmup_steps,
        profile_steps=profile_steps, learning_rate=learning_rate, ema_decay=ema_decay,
        histogram_every=histogram_every, variables_on=variables_on,
        data=None if data is None else str(data),
    )
    if workers is not None or mode is not None:  # a local cluster: gpudiag/cluster/local.py
        from gpudiag.cluster import local

        given = cluster_opts.ClusterOptions(
            workload=workload, batch_factor=batch_factor, restarts=restarts,
            form_timeout_s=form_timeout, collective_timeout_s=collective_timeout,
            timeout_s=timeout)
        copts = cluster_opts.from_cli(
            given, workers=workers, mode=mode, fault=fault,
            not_with_workers={"--max-gpus": max_gpus, "--virtual-gpus": virtual_gpus})

        def cluster_body(session: RunSession, ui: Ui) -> None:
            with _nvml(ctx) as backend:
                local.run(session, copts, backend=backend, ui=ui)

        execute("scaling", logdir, as_json, cluster_body)
    options = ScalingOptions(
        workload=workload, max_gpus=max_gpus, strategies=parse_strategies(strategy),
        virtual_gpus=virtual_gpus, memory_limit_mb=virtual_gpu_memory_mb,
        allreduce_min_mb=allreduce_min_mb, allreduce_max_mb=allreduce_max_mb, timeout_s=timeout,
    )
    check(options)  # once, before the run directory exists

    def body(session: RunSession, ui: Ui) -> None:
        with _nvml(ctx) as backend:
            scaling_cmd.run(session, options, backend=backend, ui=ui)

    execute("scaling", logdir, as_json, body)


@app.command(short_help="Join a real cluster as this machine's task.")
def worker(
    ctx: typer.Context,
    mode: str = cluster_opts.WorkerModeOpt,
    slurm: bool = cluster_opts.SlurmOpt,
    slurm_port_base: int = cluster_opts.SlurmPortBaseOpt,
    model: str = opt.ModelOpt,
    batch_per_device: int = opt.BatchPerDeviceOpt,
    steps: int = opt.StepsOpt,
    warmup_steps: int = opt.WarmupStepsOpt,
    profile_steps: int = opt.ProfileStepsOpt,
    form_timeout: float = cluster_opts.FormTimeoutOpt,
    collective_timeout: float = cluster_opts.CollectiveTimeoutOpt,
    timeout: float = typer.Option(600.0, "--timeout", callback=opt.positive, metavar="SECONDS",
                                  help="Seconds this task may run in all."),
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Join a real cluster (TF_CONFIG, or --slurm) as this machine's task; the chief
    writes the combined report. See docs/cluster.md."""
    from gpudiag.cluster import worker_cmd

    options = worker_cmd.WorkerOptions(
        workload=Workload(model=model, batch_per_device=batch_per_device, steps=steps,
                          warmup_steps=warmup_steps, profile_steps=profile_steps),
        mode=mode, slurm=slurm, slurm_port_base=slurm_port_base, form_timeout_s=form_timeout,
        collective_timeout_s=collective_timeout, timeout_s=timeout)
    tfc, env = worker_cmd.resolve(options)  # exit 2 on a bad TF_CONFIG, before anything

    def body(session: RunSession, ui: Ui) -> None:
        with _nvml(ctx) as backend:
            worker_cmd.run(session, options, tfc, env, logdir=logdir, backend=backend,
                           ui=ui)

    execute("worker", logdir, as_json, body)


@app.command(context_settings={"allow_interspersed_args": False},
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


@app.command(name="run", context_settings={"allow_interspersed_args": False},
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


@app.command(name="try", context_settings={"allow_interspersed_args": False},
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
        help="Try only this fix (repeatable): parallel-map, prefetch, steps-per-execution."),
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
    with _nvml(ctx) as backend:
        opt.check_gpus(gpu_list, backend)
        execute(name, logdir, as_json, body(backend, gpu_list), watches_a_command=True,
                strict=strict)


@app.command(short_help="Memory modes: default, growth, limit; TF's vs NVML's view.")
def memory(
    ctx: typer.Context,
    steps: int = opt.MemoryStepsOpt,
    step_mb: int = opt.MemoryStepMbOpt,
    memory_limit_mb: int | None = opt.MemoryLimitOpt,
    fraction: float | None = opt.MemoryFractionOpt,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    timeout: float = opt.TimeoutOpt,
) -> None:
    """Memory modes, each in its own process: default, growth, TF_FORCE_GPU_ALLOW_GROWTH,
    a memory limit, and changing them after initialisation. TF's view beside NVML's."""
    from gpudiag.commands import memory as memory_cmd
    from gpudiag.errors import UsageError

    if fraction is not None and memory_limit_mb is not None:
        raise UsageError("give --memory-limit-mb or --fraction, not both")

    options = memory_cmd.MemoryOptions(timeout_s=timeout, steps=steps, step_mb=step_mb,
                                       memory_limit_mb=memory_limit_mb, fraction=fraction)

    def body(session: RunSession, ui: Ui) -> None:
        with _nvml(ctx) as backend:
            memory_cmd.run(session, options, backend=backend, ui=ui)

    execute("memory", logdir, as_json, body)


@app.command(short_help="Open TensorBoard on gpudiag's runs (or --check it).")
def tensorboard(
    logdir: Path | None = typer.Argument(
        None, show_default=False, help="The logdir to open [default: the newest run "
        "directory under runs/ that answers a question (not a diff record), else runs/]."),
    port: int = opt.PortOpt,
    host: str = opt.HostOpt,
    check: bool = opt.CheckOpt,
) -> None:
    """Open TensorBoard on gpudiag's runs (localhost unless --host), or --check it."""
    from gpudiag.commands import tensorboard as tensorboard_cmd

    raise typer.Exit(tensorboard_cmd.run(
        logdir, port=port, host=host, check=check,
        say=typer.echo, warn=lambda line: typer.echo(line, err=True)))


@app.command(short_help="Where a step's time went, from traces you already have.")
def explain(
    path: Path = typer.Argument(..., show_default=False, help="A TensorBoard logdir, a "
                                "plugins/profile/<run> directory, or one .xplane.pb file."),
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    max_trace_mb: int = typer.Option(MAX_TRACE_MB, "--max-trace-mb", min=0, help="The largest "
                                     "trace read, in MiB (0: no limit); reading one costs "
                                     "about 5 times its size in memory."),
) -> None:
    """Where the steps' time went in traces you already have: per device compute, input,
    communication, host, idle, and the bottleneck. Runs nothing; no GPU needed."""
    from gpudiag.commands import explain as explain_cmd

    most = max_trace_mb * MiB
    explain_cmd.find_traces(path, max_bytes=most)  # a bad PATH: one line, exit 2, first

    def body(session: RunSession, ui: Ui) -> None:
        explain_cmd.run(session, path, ui=ui, max_bytes=most)

    execute("explain", logdir, as_json, body)


@app.command(short_help="Did the change work: B against A, with 95 % intervals.")
def diff(
    a: Path = typer.Argument(..., show_default=False, help="Run A (before): a run "
                             "directory, or a directory with profiler traces."),
    b: Path = typer.Argument(..., show_default=False, help="Run B (after)."),
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
) -> None:
    """Did the change work: step time per loop with 95 % intervals, the step's parts and
    the bottleneck before and after, the fix's predicted against measured step time."""
    from gpudiag.commands import diff as diff_cmd

    quiet = Ui.quiet()
    run_a, run_b = diff_cmd.resolve(a, logdir, quiet), diff_cmd.resolve(b, logdir, quiet)
    judgement = diff_cmd.judged(run_a, run_b)  # a run it cannot read: before writing

    def body(session: RunSession, ui: Ui) -> None:
        diff_cmd.run(session, judgement)

    execute("diff", logdir, as_json, body)


@app.command(short_help="Serve a logdir's runs to coding agents (MCP, stdio).")
def mcp(
    logdir: Path = typer.Option(Path("runs"), "--logdir", parser=opt.logdir_path,
                                help="The logdir served, read-only: nothing outside it is "
                                "read, nothing in it is written."),
    call_timeout: float = typer.Option(120.0, "--call-timeout", callback=opt.positive,
                                       metavar="SECONDS", help="The longest one tool call "
                                       "may take; past it, the call is the tool's error."),
) -> None:
    """Serve the runs of a logdir to coding agents: a Model Context Protocol server over
    stdio (tools list_runs, show_run, explain, diff; docs/mcp.md). Runs nothing."""
    from gpudiag.mcp import server

    server.serve(logdir, call_timeout)


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


def main(argv: list[str] | None = None, *, open_nvml: Opener | None = None) -> int:
    """Console-script entry point; returns the exit code (see module docstring).

    ``open_nvml`` replaces how the commands open NVML (default: the real backend)."""
    install_signal_handlers()  # first: a signal while click builds the command is handled
    stdstreams.reopen_closed()
    try:
        return _main(argv, open_nvml)
    except BaseException:  # e.g. an import a signal interrupted fails when tried again
        if (code := interrupted_exit()) is None:
            raise
        return code


#: An option's value as --help names it where its declaration names none (typer's own
#: ``<int range>``, ``<bool>`` and ``<list[str]>`` are noise in an 80-column help).
_METAVARS = {"int": "N", "float": "NUMBER", "str": "TEXT", "Path": "PATH"}


def readable_help(command: Any) -> Any:
    """``command`` (the group typer builds) with every subcommand's help readable at 80
    columns: each option's value named in a word (N, NUMBER, TEXT, PATH) where its
    declaration names none, a flag's not at all; an argument by its name alone (A, PATH),
    without typer's type beside it."""
    from typer.core import TyperArgument, TyperOption

    for sub in getattr(command, "commands", {}).values():
        for param in sub.params:
            if isinstance(param, TyperOption) and param.metavar is None and not param.is_flag:
                param.metavar = _METAVARS.get(param.bare_type(), "VALUE")
            elif isinstance(param, TyperArgument):
                param.metavar = param.metavar or (param.name or "").upper()
                setattr(param, "display_type_rich", lambda ctx: None)  # noqa: B010
    return command


def _main(argv: list[str] | None, open_nvml: Opener | None) -> int:
    try:
        command = readable_help(typer.main.get_command(app))
        rv = command.main(args=argv, prog_name="gpudiag", standalone_mode=False, obj=open_nvml)
    except BaseException as exc:
        return exit_code_of(exc)
    code = interrupted_exit() if rv == EXIT_INTERRUPTED else None
    return int(rv or 0) if code is None else code  # typer's silent 130 for a SIGTERM


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
