"""The gpudiag command line. Thin: parse options, call one function per command, render.

Imports no TensorFlow at module level, so ``gpudiag --help`` is instant; TensorFlow only
ever runs in the probes' child processes. Errors are gpudiag's own exception types and
click's usage errors, turned once, in ``main``, into a one-line message and an exit code:
0 all checks passed, 1 a check failed, 2 bad usage or input, 3 environment broken,
130 interrupted (the partial report is still written).

NVML is opened here, at the edge, for each command that needs it (gpudiag.execute's
``nvml_for`` and ``execute_with_nvml``: a ``with`` block, so the code that opens it closes
it) and passed into the command function as ``backend``. ``main(argv, open_nvml=...)`` is
the one seam that replaces the real opener (gpudiag.nvml.open_backend) with another, e.g.
a test's scripted fake backend; it reaches the commands as the click context's ``obj``.

This module holds the app, the probes' and the reading commands; scaling_cli.py the
training commands (scaling, worker), program_cli.py those that run the user's command
(monitor, run, try).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from gpudiag import __version__
from gpudiag import cliopts as opt
from gpudiag.cli import program_cli, scaling_cli
from gpudiag.execute import (
    EXIT_INTERRUPTED,
    execute,
    execute_with_nvml,
    exit_code_of,
    interrupted_exit,
)
from gpudiag.procs import stdstreams, stops
from gpudiag.rundir.confine import MAX_TRACE_MB, MiB
from gpudiag.session import RunSession
from gpudiag.ui import Ui

if TYPE_CHECKING:
    from gpudiag.nvml import Opener


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


@app.command(short_help="What TensorFlow, CUDA, NVML and the devices look like.")
def env(
    ctx: typer.Context,
    logdir: Path = opt.LogdirOpt,
    as_json: bool = opt.JsonOpt,
    timeout: float = opt.TimeoutOpt,
) -> None:
    """What TensorFlow, CUDA, NVML and the devices look like, and the mismatches between them."""
    from gpudiag.commands import env as env_cmd

    execute_with_nvml(ctx, "env", logdir, as_json,
                      lambda session, backend, ui: env_cmd.run(
                          session, backend=backend, timeout_s=timeout, ui=ui))


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


# the training commands and those that run the user's command, in their place in --help
app.registered_commands += [*scaling_cli.commands.registered_commands,
                            *program_cli.commands.registered_commands]


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

    execute_with_nvml(ctx, "memory", logdir, as_json,
                      lambda session, backend, ui: memory_cmd.run(
                          session, options, backend=backend, ui=ui))


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
    stops.install()  # first: a signal while click builds the command is handled
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
        stops.check()  # a stop request a callback dropped after the last check: acted on
    except BaseException as exc:
        return exit_code_of(exc)
    code = interrupted_exit() if rv == EXIT_INTERRUPTED else None
    return int(rv or 0) if code is None else code  # typer's silent 130 for a SIGTERM


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
