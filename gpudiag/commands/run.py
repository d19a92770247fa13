"""`gpudiag run -- python train.py`: run the user's program with gpudiag's hooks loaded.

The parent side; imports no TensorFlow. The program runs as a child process with this
process's stdin and its own stdout/stderr piped through gpudiag.run.streams (a pty for
stdout when gpudiag's own stdout is a terminal, so the program still sees a terminal and
keeps its line buffering and progress bars). Its environment gets:

- PYTHONPATH with gpudiag/inprogram/hooks first (its sitecustomize loads the hooks and chains
  to any other sitecustomize), and layout.ENV_RUN_PKG_ROOT / ENV_RUN_CONFIG;
- TF_CPP_MIN_LOG_LEVEL=0, so TensorFlow's whole C++ log is captured; the user's own level
  (if their environment set one) still decides which of those lines reach the terminal.

NVML samples every GPU from before the program starts until it ends, as `monitor` does.
The program runs as the leader of a process group of its own (gpudiag.procs: it and
everything it starts end with gpudiag, `kill -9` included). Ctrl-C, SIGTERM and SIGHUP
reach gpudiag, which passes the signal on to the program's group as `monitor` does
(procs.command.stop_child) and writes the report with what was seen (exit 128 + the
signal). The program's non-zero exit code is forwarded.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import gpudiag
from gpudiag import inprogram, nvml
from gpudiag.errors import EXIT_ENVIRONMENT, UsageError, WriteFailed, signum_of
from gpudiag.inprogram.config import (
    RunHookConfig,
)
from gpudiag.layout import (
    ENV_RUN_CONFIG,
    ENV_RUN_PKG_ROOT,
    RUN_CHILD_NAME,
    RUN_STDERR,
    RUN_STDOUT,
    child_dir,
)
from gpudiag.procs import group as procs
from gpudiag.procs.command import exit_code_of, resolve_command, stop_child
from gpudiag.run import live as run_live
from gpudiag.run import statusline, streams, survivors
from gpudiag.run.options import Finish, Outcome, RunOptions
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts.run import outcome as run_outcome

HOOKS_DIR = Path(inprogram.__file__).resolve().with_name("hooks")
PKG_ROOT = Path(gpudiag.__file__).resolve().parent.parent
_PYTHON_NAME = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)?)?$")


def resolve(command: Sequence[str]) -> list[str]:
    """The command, checked (UsageError, exit 2: none, not found, not executable, a
    Python interpreter given a script that does not exist)."""
    argv = resolve_command(command, name="run")
    script = python_script(argv)
    if script is not None and not Path(script).exists():
        raise UsageError(f"no such script: {script} (looked in {Path.cwd()}); the command "
                         f"was not started")
    return argv


# Python's options that take the next word as their value (-W ignore, -X dev, ...).
_PY_VALUE_OPTIONS = frozenset("WX")
_PY_LONG_VALUE_OPTIONS = frozenset({"--check-hash-based-pycs"})


def python_script(argv: Sequence[str]) -> str | None:
    """The script a Python interpreter's command line names (``python -u train.py`` ->
    ``train.py``), or None: not an interpreter (a shebang script is itself the script),
    ``-c``, ``-m``, ``-`` (stdin), ``--help``/``--version``, or no script (the REPL)."""
    path = shutil.which(argv[0]) or argv[0]
    if not _PYTHON_NAME.match(Path(path).name):
        try:
            if Path(path).resolve() != Path(sys.executable).resolve():
                return None
        except OSError:
            return None
    i = 1
    while i < len(argv):
        word = argv[i]
        if word == "--":
            return argv[i + 1] if i + 1 < len(argv) else None
        if word == "-" or word in ("--help", "--version"):
            return None
        if word.startswith("--"):
            i += 2 if word in _PY_LONG_VALUE_OPTIONS else 1
            continue
        if word.startswith("-"):
            for j, flag in enumerate(word[1:], 1):
                if flag in "cm":  # the rest is the command or the module
                    return None
                if flag in _PY_VALUE_OPTIONS:
                    i += 1 if j < len(word) - 1 else 2  # -Wignore or -W ignore
                    break
            else:
                i += 1
            continue
        return word
    return None


def is_python(argv: Sequence[str]) -> bool:
    """Whether the command starts a Python interpreter: python3, an interpreter path, or a
    script whose shebang names Python."""
    path = shutil.which(argv[0]) or argv[0]
    if _PYTHON_NAME.match(Path(path).name):
        return True
    try:
        if Path(path).resolve() == Path(sys.executable).resolve():
            return True
        with Path(path).open("rb") as f:
            first = f.readline(256)
    except OSError:
        return False
    return first.startswith(b"#!") and b"python" in first


def program_env(base: Mapping[str, str], config: RunHookConfig) -> dict[str, str]:
    """The program's environment: the user's, plus the hooks and the full C++ log."""
    env = dict(base)
    paths = [str(HOOKS_DIR)] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ENV_RUN_PKG_ROOT] = str(PKG_ROOT)
    env[ENV_RUN_CONFIG] = config.to_env()
    env["TF_CPP_MIN_LOG_LEVEL"] = config.child_cpp_log_level
    return env


def _start_sampler(backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions
                   ) -> tuple[nvml.Sampler | None, str | None]:
    if isinstance(backend, nvml.NvmlUnavailable):
        return None, backend.reason
    sampler = nvml.Sampler(backend, options.interval_s, options.gpus,
                           active_threshold_percent=options.idle_threshold_percent)
    try:
        sampler.start()
    except nvml.DeviceError as exc:  # the CLI, which opened the backend, closes it
        return None, f"NVML failed at start: {exc}"
    return sampler, None


def execute(session: RunSession, argv: list[str], *,
            backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions,
            stdout_to_stderr: bool = False, ui: Ui) -> Outcome:
    """Run the program with the hooks; return what was seen (the analysis is separate).
    An interrupt (Ctrl-C, SIGTERM, SIGHUP) stops the program and is returned in
    ``Outcome.interrupt``; the caller reports, then re-raises it."""
    out_dir = child_dir(session.run_dir, RUN_CHILD_NAME)
    user_level = os.environ.get("TF_CPP_MIN_LOG_LEVEL")
    # Absolute: the program may change its working directory (the default logdir, runs,
    # is relative), and its trace, events and crash stack must still land in the run.
    config = RunHookConfig(events_dir=str(out_dir.absolute()),
                           run_dir=str(session.run_dir.absolute()),
                           profile_warmup_steps=options.profile_warmup_steps,
                           profile_steps=options.profile_steps,
                           placement_log=options.placement_log, user_cpp_log_level=user_level,
                           stall_timeout_s=options.stall_timeout_s)
    state = streams.FilterState(user_level=streams.user_level(user_level))
    sampler, reason = _start_sampler(backend, options)
    if sampler is None:
        ui.say(f"NVML not available ({reason}): running without GPU sampling")
    else:
        ui.say(f"sampling {len(sampler.device_indices)} GPU(s) every {options.interval_s:g} s")
    terminal_out = sys.stderr.buffer if stdout_to_stderr else sys.stdout.buffer
    use_pty = not stdout_to_stderr and sys.stdout.isatty()
    stdout_path, stderr_path = out_dir / RUN_STDOUT, out_dir / RUN_STDERR
    returncode: int | None = None
    interrupt: KeyboardInterrupt | None = None
    start = time.monotonic()
    with stdout_path.open("wb") as out_file, stderr_path.open("wb") as err_file:
        saved = [streams.SaveFile(out_file, stdout_path, on_fail=_say_save_failed),
                 streams.SaveFile(err_file, stderr_path, on_fail=_say_save_failed)]
        if use_pty:
            read_out, write_out = os.openpty()
        else:
            read_out, write_out = os.pipe()
            streams.grow_pipe(write_out)
        read_err, write_err = os.pipe()
        streams.grow_pipe(write_err)
        try:
            proc = procs.spawn(argv, stdout=write_out, stderr=write_err,
                               env=program_env(os.environ, config))
        except OSError as exc:
            for fd in (read_out, write_out, read_err, write_err):
                os.close(fd)
            if sampler is not None:
                sampler.stop()
            raise UsageError(f"cannot run {argv[0]}: {exc.strerror}") from exc
        ends = {e for e in map(survivors.end_name, (write_out, write_err)) if e}
        os.close(write_out)
        os.close(write_err)
        terminal = _status_line(options)
        watcher = run_live.Live(out_dir, session.run_dir, terminal.say(ui.say_line)
                                if terminal else ui.say_line, sampler)
        if terminal is not None:
            terminal.text = watcher.status
        watcher.start()
        pumps = [streams.pump(read_out, saved[0], _shown(terminal, terminal_out),
                              streams.LineFilter(state, "stdout")),
                 streams.pump(read_err, saved[1], _shown(terminal, sys.stderr.buffer),
                              streams.LineFilter(state, "stderr"))]
        if terminal is not None:
            terminal.start()
        try:
            try:
                returncode = proc.wait()
                procs.release(proc)
            except KeyboardInterrupt as exc:
                interrupt = exc
                stop_child(proc, signum_of(exc))
                returncode = proc.returncode
        finally:  # the program's end is its own exit, whoever still holds its output
            exited = Finish(time.time(), time.monotonic())
            if terminal is not None:
                terminal.close()
            shows = [terminal_out, sys.stderr.buffer]
            try:
                settled = survivors.settle(pumps, ends, shows)
            except KeyboardInterrupt as exc:  # it had ended: the report still says all
                interrupt = interrupt or exc
                settled = survivors.settle(pumps, ends, shows)  # SIGTERM/HUP now ignored
            duration = time.monotonic() - start
            exited.mark("output_drained_s")
            # first: the live thread's last poll then writes every sample it returned
            result = sampler.stop() if sampler is not None else None
            shown = watcher.stop(returncode)
            exited.mark("live_stopped_s")
    failures = tuple(WriteFailed.of(f.failure, f.path) for f in saved if f.failure)
    return Outcome(returncode, duration, interrupt, result, reason, state, stdout_path,
                   stderr_path, out_dir, failures, settled, shown, exited)


def _status_line(options: RunOptions) -> statusline.Terminal | None:
    """The status line: on a terminal (gpudiag's stderr), unless --quiet."""
    try:
        on_terminal = sys.stderr.isatty()
    except (AttributeError, ValueError):
        on_terminal = False
    if options.quiet or not on_terminal:
        return None
    return statusline.Terminal(sys.stderr.buffer, lambda: "")


def _shown(terminal: statusline.Terminal | None, stream: BinaryIO) -> streams.Shows:
    """Where a pump shows: through the status line where the stream is that terminal."""
    try:
        same = terminal is not None and stream.isatty()
    except (AttributeError, ValueError):
        same = False
    return terminal.through(stream) if same and terminal is not None else stream


def _say_save_failed(saved: streams.SaveFile) -> None:
    """Said at once, from the pump, while the program goes on."""
    assert saved.failure is not None
    message = WriteFailed.of(saved.failure, saved.path).message
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"gpudiag: {message}: stopped saving the program's output there; "
                         f"the program goes on and its output still reaches the terminal\n")
        sys.stderr.flush()


def run(session: RunSession, argv: list[str], *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions,
        stdout_to_stderr: bool = False, ui: Ui) -> int | None:
    """Run, analyse, report. Returns the exit code to forward (None when it was 0)."""
    from gpudiag.run import analyse

    outcome = execute(session, argv, backend=backend, options=options,
                      stdout_to_stderr=stdout_to_stderr, ui=ui)
    if outcome.returncode:  # 0: the findings decide the exit code
        session.forward_exit(exit_code_of(outcome.returncode))
    elif outcome.save_failures:  # the program ran its course; the run is not whole
        session.forward_exit(EXIT_ENVIRONMENT)
    if not outcome.stderr_path.is_file():  # the run directory was removed while it ran
        raise WriteFailed(f"the run directory {session.run_dir} was removed while the "
                          "program ran: no report")
    analyse.report(session, argv, outcome, options, python=is_python(argv))
    for finding in (run_outcome.saved_output([f.message for f in outcome.save_failures]),
                    run_outcome.survivors([(d.pid, d.command) for d in outcome.settled.survivors],
                                          outcome.settled.forwarders, outcome.settled.held)):
        if finding is not None:
            with contextlib.suppress(WriteFailed):  # the same full disk may refuse it too
                session.add(finding)
    if outcome.interrupt is not None:
        raise outcome.interrupt
    return exit_code_of(outcome.returncode) if outcome.returncode else None
