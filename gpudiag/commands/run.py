"""`gpudiag run -- python train.py`: run the user's program with gpudiag's hooks loaded.

The parent side; imports no TensorFlow. The program runs as a child process with this
process's stdin and its own stdout/stderr read through gpudiag.run.streams (each a
pseudo-terminal like gpudiag's where gpudiag's counterpart is a terminal: gpudiag.run.terminal,
so the program sees a terminal of the same size and keeps its line buffering and progress
bars). Its environment gets:

- PYTHONPATH with gpudiag/inprogram/hooks first (its sitecustomize loads the hooks and chains
  to any other sitecustomize), and layout.ENV_RUN_PKG_ROOT / ENV_RUN_CONFIG;
- nothing else: TF_CPP_MIN_LOG_LEVEL stays the user's. The hooks lend TensorFlow's import
  level 0 (gpudiag.inprogram.cpplevel), so its whole C++ log is captured, and the level
  the program had at that moment decides which of those lines reach the terminal.

NVML samples every GPU from before the program starts until it ends, as `monitor` does.
The program runs as the leader of a process group of its own (gpudiag.procs: it and
everything it starts end with gpudiag, `kill -9` included). Ctrl-C, SIGTERM and SIGHUP
reach gpudiag, which passes the signal on to the program's group as `monitor` does
(procs.command.stop_child) and writes the report with what was seen (exit 128 + the
signal). The program's non-zero exit code is forwarded.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import BinaryIO

import gpudiag
from gpudiag import inprogram, nvml
from gpudiag.errors import UsageError, WriteFailed, signum_of
from gpudiag.inprogram.config import RunHookConfig, stream_id
from gpudiag.layout import (
    ENV_RUN_CONFIG,
    ENV_RUN_PKG_ROOT,
    RUN_CHILD_NAME,
    RUN_PROCESSES,
    RUN_STDERR,
    RUN_STDOUT,
    child_dir,
)
from gpudiag.procs import group as procs
from gpudiag.procs import jobcontrol, stops
from gpudiag.procs.command import (
    exit_code_of,
    is_python,
    python_script,
    resolve_command,
    stop_child,
)
from gpudiag.run import keyboard, processes, statusline, streams, survivors
from gpudiag.run import live as run_live
from gpudiag.run import terminal as terminal_mod
from gpudiag.run.options import Finish, Outcome, RunOptions
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts.run import outcome as run_outcome

HOOKS_DIR = Path(inprogram.__file__).resolve().with_name("hooks")
PKG_ROOT = Path(gpudiag.__file__).resolve().parent.parent
def resolve(command: Sequence[str], name: str = "run") -> list[str]:
    """The command, checked (UsageError, exit 2: none, not found, not executable, a
    Python interpreter given a script that does not exist)."""
    argv = resolve_command(command, name=name)
    script = python_script(argv)
    if script is not None and not Path(script).exists():
        raise UsageError(f"no such script: {script} (looked in {Path.cwd()}); the command "
                         f"was not started")
    return argv


def program_env(base: Mapping[str, str], config: RunHookConfig) -> dict[str, str]:
    """The program's environment: the user's, plus the hooks."""
    env = dict(base)
    paths = [str(HOOKS_DIR)] + ([base["PYTHONPATH"]] if base.get("PYTHONPATH") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths)
    env[ENV_RUN_PKG_ROOT] = str(PKG_ROOT)
    env[ENV_RUN_CONFIG] = config.to_env()
    return env


def _start_sampler(backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions,
                   ui: Ui) -> tuple[nvml.Sampler | None, str | None]:
    """The sampler, started, and said (None without NVML, or when NVML failed at start: the
    reason)."""
    sampler, reason = None, None
    if isinstance(backend, nvml.NvmlUnavailable):
        reason = backend.reason
    else:
        sampler = nvml.Sampler(backend, options.interval_s, options.gpus,
                               active_threshold_percent=options.idle_threshold_percent)
        try:
            sampler.start()
        except nvml.DeviceError as exc:  # the CLI, which opened the backend, closes it
            sampler, reason = None, f"NVML failed at start: {exc}"
    if sampler is None:
        ui.say(f"NVML not available ({reason}): running without GPU sampling")
    else:
        ui.say(f"sampling {len(sampler.device_indices)} GPU(s) every {options.interval_s:g} s")
    return sampler, reason


def execute(session: RunSession, argv: list[str], *,
            backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions,
            stdout_to_stderr: bool = False, ui: Ui) -> Outcome:
    """Run the program with the hooks; return what was seen (the analysis is separate).
    An interrupt (Ctrl-C, SIGTERM, SIGHUP) stops the program and is returned in
    ``Outcome.interrupt``; the caller reports, then re-raises it."""
    out_dir = child_dir(session.run_dir, RUN_CHILD_NAME)
    config = _hook_config(session, out_dir, options)
    state = streams.FilterState(user_level=streams.user_level(
        os.environ.get("TF_CPP_MIN_LOG_LEVEL")))  # until the program imports TensorFlow
    sampler, reason = _start_sampler(backend, options, ui)
    terminal_out = sys.stderr.buffer if stdout_to_stderr else sys.stdout.buffer
    stdout_path, stderr_path = out_dir / RUN_STDOUT, out_dir / RUN_STDERR
    returncode: int | None = None
    interrupt: KeyboardInterrupt | None = None
    start = time.monotonic()
    with (stdout_path.open("wb") as out_file, stderr_path.open("wb") as err_file,
          contextlib.ExitStack() as stack):
        saved = [streams.SaveFile(out_file, stdout_path, on_fail=_say_save_failed),
                 streams.SaveFile(err_file, stderr_path, on_fail=_say_save_failed)]
        (read_out, write_out), (read_err, write_err), resize = terminal_mod.program_ends(
            stdout_to_stderr)
        stack.enter_context(terminal_mod.resized(resize))  # before the program can ask
        config = dataclasses.replace(config, stderr_stream=stream_id(write_err),
                                     stdout_stream=stream_id(write_out))
        stops.defer()  # a stop request while the watch is set up is acted on in the wait
        stack.callback(stops.undefer)  # however this ends, requests are raised again
        try:
            proc = procs.spawn_program(argv, stdout=write_out, stderr=write_err,
                                       env=program_env(os.environ, config))
        except OSError as exc:
            for fd in (read_out, write_out, read_err, write_err):
                os.close(fd)
            if sampler is not None:
                sampler.stop()
            stops.resume()
            raise UsageError(f"cannot run {argv[0]}: {exc.strerror}") from exc
        program_pid = procs.program_pid(proc)  # the shim's child (release forgets it)
        terminal = _status_line(options)
        say = terminal.say(ui.say_line) if terminal else ui.say_line
        watch, keys = _watch(proc, out_dir, resize, say)
        ends = {e for e in map(survivors.end_name, (write_out, write_err)) if e}
        os.close(write_out)
        os.close(write_err)
        watcher = run_live.Live(out_dir, session.run_dir, say, sampler)
        if terminal is not None:
            terminal.text = watcher.status
        watcher.start()
        pumps = [streams.pump(fd, save, _shown(terminal, out) if options.echo else None,
                              streams.LineFilter(state, name))
                 for fd, save, out, name in ((read_out, saved[0], terminal_out, "stdout"),
                                             (read_err, saved[1], sys.stderr.buffer, "stderr"))]
        if terminal is not None:
            terminal.start()
        try:
            returncode, interrupt, limited = _wait(proc, options.grace_s, _guarded(say), keys,
                                                   options.time_limit_s)
        finally:  # the program's end is its own exit, whoever still holds its output
            exited = Finish(time.time(), time.monotonic())
            watch.stop()
            if keys is not None:
                keys.close()  # the user's terminal in its own mode again
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
            shown = watcher.stop(returncode, program_pid)
            exited.mark("live_stopped_s")
    return Outcome(returncode, duration, interrupt, result, reason, state, stdout_path,
                   stderr_path, out_dir, *_save_outcome(saved), settled, shown, exited,
                   program_pid, limited)


def _watch(proc: subprocess.Popen[bytes], out_dir: Path, resize: Sequence[tuple[int, int]],
           say: Callable[[str], None]
           ) -> tuple[processes.ProcessWatch, keyboard.Keyboard | None]:
    """The watch of the program's processes, started; and where the program has gpudiag's
    pseudo-terminal, the keyboard passing the user's keys into it while a process reads
    /dev/tty (the controlling one is the first: gpudiag.procs.shim)."""
    keys = keyboard.Keyboard.open(resize[0][1]) if resize else None
    watch = processes.ProcessWatch(proc.pid, out_dir / RUN_PROCESSES, str(HOOKS_DIR),
                                   tty=bool(resize), say=say, keyboard=keys)
    watch.start()
    if keys is not None:
        keys.start()
    return watch, keys


def _hook_config(session: RunSession, out_dir: Path, options: RunOptions) -> RunHookConfig:
    # Absolute: the program may change its working directory (the default logdir, runs,
    # is relative), and its trace, events and crash stack must still land in the run.
    return RunHookConfig(events_dir=str(out_dir.absolute()),
                         run_dir=str(session.run_dir.absolute()),
                         profile_warmup_steps=options.profile_warmup_steps,
                         profile_steps=options.profile_steps,
                         placement_log=options.placement_log,
                         stall_timeout_s=options.stall_timeout_s,
                         trial_fixes=options.trial_fixes,
                         stop_after_steps=options.stop_after_steps,
                         stop_function=options.stop_function)


def _save_outcome(saved: Sequence[streams.SaveFile]) -> tuple[tuple[WriteFailed, ...],
                                                              tuple[str, ...]]:
    """The saved streams that failed, and those stopped at the disk reserve (why, each)."""
    failures = tuple(WriteFailed.of(f.failure, f.path) for f in saved
                     if f.failure and not isinstance(f.failure, streams.KeptFree))
    kept = tuple(f"{f.path.name}: {f.failure.strerror}" for f in saved
                 if isinstance(f.failure, streams.KeptFree))
    return failures, kept


def _wait(proc: subprocess.Popen[bytes], grace_s: float, say: Callable[[str], None],
          keys: keyboard.Keyboard | None = None, limit_s: float | None = None
          ) -> tuple[int | None, KeyboardInterrupt | None, float | None]:
    """Wait for the program; pass signals on as plainly they would have reached it.

    SIGHUP is passed on and gpudiag goes on watching (the program decides: under ``nohup``
    it ignores it and runs on). SIGTERM and Ctrl-C are passed on and the program has
    ``grace_s`` to end by itself before SIGKILL (a second Ctrl-C ends it at once). Ctrl-Z
    and ``fg`` reach it (gpudiag.procs.jobcontrol). The interrupt is returned only when
    the program did not end by itself with a code of its own: killed by gpudiag, or
    ended by the very signal passed on (then gpudiag's code is the same, 128 + N).
    ``limit_s`` (a `gpudiag try` trial's): past it, the program is ended as a SIGTERM
    would end it, and the limit is returned third (None: it ended within it)."""
    interrupt: KeyboardInterrupt | None = None
    deadline = None if limit_s is None else time.monotonic() + limit_s
    # gpudiag's handlers (gpudiag.execute), put back after a SIGHUP passed on: the first
    # signal handled sets them to SIG_IGN
    handlers = {s: signal.getsignal(s) for s in (signal.SIGTERM, signal.SIGHUP)}
    with jobcontrol.passed_on(lambda: procs.groups_of(proc), keys):
        while True:
            try:
                stops.resume()  # a request kept since the program started: passed on now
                returncode = procs.wait(proc, None if deadline is None
                                        else max(0.0, deadline - time.monotonic()))
                procs.release(proc)
                break
            except subprocess.TimeoutExpired:
                say(f"gpudiag: the program ran past its time limit ({limit_s:g} s): SIGTERM, "
                    f"then SIGKILL after {grace_s:g} s")
                stop_child(proc, signal.SIGTERM, grace_s)
                procs.release(proc)
                return proc.returncode, None, limit_s
            except KeyboardInterrupt as exc:
                signum = signum_of(exc)
                name = signal.Signals(signum).name
                interrupt = exc
                if signum == signal.SIGHUP:
                    procs.signal_group(proc, signum)
                    say("gpudiag: SIGHUP passed on to the program; gpudiag goes on watching "
                        "it (whether it ends is the program's choice, as plainly)")
                    for sig, handler in handlers.items():
                        if handler is not None:
                            signal.signal(sig, handler)
                    continue
                if procs.program_ended(proc):  # it came after the program's own end: not
                    returncode = proc.wait()  # passed on, and gpudiag's code says it
                    procs.release(proc)
                    return returncode, interrupt, None
                say(f"gpudiag: {name} passed on to the program: it has {grace_s:g} s to end "
                    f"by itself (--grace) before SIGKILL; Ctrl-C again ends it now")
                if stop_child(proc, signum, grace_s):
                    say("gpudiag: the program did not end within its grace: ended with SIGKILL")
                    return proc.returncode, interrupt, None
                returncode = proc.returncode
                break
    if interrupt is not None and returncode != -signum_of(interrupt):
        interrupt = None  # it ended by itself, its own way: its code is gpudiag's
    return returncode, interrupt, None


def _guarded(say: Callable[[str], None]) -> Callable[[str], None]:
    """A line on gpudiag's stderr that never fails (a closed stderr, a hung-up terminal)."""
    def said(text: str) -> None:
        with contextlib.suppress(Exception):
            say(text)
    return said


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
    if isinstance(saved.failure, streams.KeptFree):
        message = f"{saved.path}: {saved.failure.strerror}"
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"gpudiag: {message}: stopped saving the program's output there; "
                         f"the program goes on and its output still reaches the terminal\n")
        sys.stderr.flush()


def run(session: RunSession, argv: list[str], *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: RunOptions,
        stdout_to_stderr: bool = False, ui: Ui) -> int | None:
    """Run, analyse, report. Returns the program's exit code, which gpudiag ends with (None: it has
    none)."""
    from gpudiag.run import analyse

    outcome = execute(session, argv, backend=backend, options=options,
                      stdout_to_stderr=stdout_to_stderr, ui=ui)
    # the program's own code, 0 included: its findings never change a job's outcome (the
    # saved copy of its output that could not be written is a finding, run.saved-output)
    if outcome.returncode is not None:
        session.forward_exit(exit_code_of(outcome.returncode))
    if not outcome.stderr_path.is_file():  # the run directory was removed while it ran
        raise WriteFailed(f"the run directory {session.run_dir} was removed while the "
                          "program ran: no report")
    analyse.report_whole(session, argv, outcome, options, python=is_python(argv))
    for finding in (run_outcome.saved_output([f.message for f in outcome.save_failures],
                                             outcome.kept_free),
                    run_outcome.survivors([(d.pid, d.command) for d in outcome.settled.survivors],
                                          outcome.settled.forwarders, outcome.settled.held)):
        if finding is not None:
            with contextlib.suppress(WriteFailed):  # the same full disk may refuse it too
                session.add(finding)
    if outcome.interrupt is not None:
        raise outcome.interrupt
    return None if outcome.returncode is None else exit_code_of(outcome.returncode)
