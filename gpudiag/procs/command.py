"""A command that gpudiag runs for the user (`monitor` and `run`): checked before any run
directory exists, stopped with the signal that interrupted gpudiag, its exit status as a
shell would give it."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from gpudiag.errors import UsageError, signum_of
from gpudiag.procs import group

#: After the interrupting signal has been passed on to the command's process group: how
#: long it has to end by itself (``--grace``) before SIGKILL. Kubernetes and Slurm give a
#: preempted job 30 s by default; a checkpoint written on SIGTERM needs that much.
DEFAULT_GRACE_S = 30.0


def resolve_command(command: Sequence[str], name: str = "monitor") -> list[str]:
    """The command to run, checked: UsageError when there is none or it cannot be found."""
    if not command:
        raise UsageError(
            f"{name} needs a command to run: gpudiag {name} [OPTIONS] -- CMD [ARGS]..."
        )
    program = command[0]
    if shutil.which(program) is None:
        path = Path(program)
        if os.sep in program and path.is_file():
            raise UsageError(f"command is not executable: {program}")
        if os.sep in program and path.is_dir():
            raise UsageError(f"command is a directory: {program}")
        raise UsageError(f"command not found: {program}")
    _check_runnable(Path(shutil.which(program) or program))
    return list(command)


_EXECUTABLE_MAGIC = (b"#!", b"\x7fELF")


def _check_runnable(path: Path) -> None:
    """A file the kernel would refuse (ENOEXEC): say so before any run directory exists."""
    try:
        with path.open("rb") as handle:
            head = handle.read(4)
    except OSError:
        return  # unreadable but executable: let exec decide
    if head and not head.startswith(_EXECUTABLE_MAGIC):
        raise UsageError(f"cannot run {path}: it has no #! line (a script needs a first line "
                         f"such as #!/bin/sh, or run it through its interpreter: sh {path})")
    if head.startswith(b"#!"):
        _check_interpreter(path)


def _check_interpreter(path: Path) -> None:
    """A ``#!`` naming an interpreter that is not there (the kernel's ENOENT, which names
    the script): said before any run directory exists, naming the interpreter."""
    try:
        with path.open("rb") as handle:
            line = handle.readline(4096)
    except OSError:
        return
    words = line[2:].strip().split()
    if not words:
        return
    interpreter = Path(os.fsdecode(words[0]))
    if interpreter.is_absolute() and not os.access(interpreter, os.X_OK):
        why = "does not exist" if not interpreter.exists() else "is not executable"
        raise UsageError(f"cannot run {path}: its #! line names {interpreter}, which {why}")


def stop_child(proc: subprocess.Popen[bytes], signum: int,
               grace_s: float = DEFAULT_GRACE_S) -> bool:
    """Pass the interrupting signal on to the command's whole process group (it runs in
    a group of its own, so the terminal's Ctrl-C reaches gpudiag only), give it ``grace_s``
    to end by itself, then end the group with SIGKILL. A second Ctrl-C (SIGINT) while it
    has its grace ends it at once; a SIGTERM or SIGHUP then is passed on too and changes
    nothing else. Returns whether gpudiag had to kill it (False: it ended by itself)."""
    group.signal_group(proc, signum)
    deadline = time.monotonic() + grace_s
    killed = False
    while proc.returncode is None:
        try:
            group.wait(proc, max(0.0, deadline - time.monotonic()))  # a dropped Ctrl-C too
        except subprocess.TimeoutExpired:
            killed = True
            break
        except KeyboardInterrupt as again:
            if signum_of(again) == signal.SIGINT:  # the user's second Ctrl-C
                killed = True
                break
            group.signal_group(proc, signum_of(again))
    if killed:
        group.signal_group(proc, signal.SIGKILL)
    group.stop_group(proc, ((None, 5.0), *group.STOP_SEQUENCE))
    return killed


def exit_code_of(returncode: int) -> int:
    """A shell's convention: a child killed by signal N exits 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


