"""A command that gpudiag runs for the user (`monitor` and `run`): checked before any run
directory exists (and whether it starts Python, and which script), stopped with the signal
that interrupted gpudiag, its exit status as a shell would give it."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
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


_PYTHON_NAME = re.compile(r"^(?:python|pypy)(?:\d+(?:\.\d+)?)?$")


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
