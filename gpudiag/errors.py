"""gpudiag's own exception types, caught once at the CLI edge.

Each carries the process exit code the CLI turns it into (see docs/findings.md):
0 all checks passed, 1 a check failed, 2 bad usage or input, 3 environment broken.
"""

from __future__ import annotations

import signal

EXIT_OK = 0
EXIT_CHECK_FAILED = 1
EXIT_USAGE = 2
EXIT_ENVIRONMENT = 3


class GpudiagError(Exception):
    """Base class: a message for the user (one line) and an exit code."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UsageError(GpudiagError):
    """Bad command-line usage or bad input file: exit 2."""

    exit_code = EXIT_USAGE


class EnvironmentBroken(GpudiagError):
    """The environment cannot run the diagnosis at all (e.g. TensorFlow missing): exit 3."""

    exit_code = EXIT_ENVIRONMENT


class Interrupted(KeyboardInterrupt):
    """SIGTERM or SIGHUP turned into what Ctrl-C is, so every path that stops children and
    writes the partial report on Ctrl-C does so for them too. ``signum`` gives the exit
    code, 128 + signum, as a shell reports a process ended by that signal."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def signum_of(interrupt: KeyboardInterrupt) -> int:
    """The signal behind an interrupt: Interrupted's (SIGTERM, SIGHUP), else SIGINT
    (Ctrl-C)."""
    return int(getattr(interrupt, "signum", signal.SIGINT))


class WriteFailed(EnvironmentBroken):
    """A file of the run could not be written (a full disk, a read-only filesystem): exit 3,
    one line naming the path and the errno."""

    @classmethod
    def of(cls, exc: OSError, path: object) -> WriteFailed:
        import errno as errno_mod

        code = exc.errno or 0
        name = errno_mod.errorcode.get(code, str(code))
        return cls(f"cannot write {exc.filename or path}: {exc.strerror or exc} "
                   f"(errno {code}, {name})")
