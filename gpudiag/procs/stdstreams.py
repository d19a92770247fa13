"""gpudiag's standard streams when its caller closed some (``>&-``, ``2>&-``, ``<&-``).

Each closed one is opened on /dev/null at gpudiag's start (``reopen_closed``, called first
by gpudiag.cli.main), so that no file gpudiag opens takes its number and gpudiag's own
output has somewhere to go. `run`'s program gets them closed, as plainly
(gpudiag.procs.shim closes them before it executes the program).
"""

from __future__ import annotations

import os
import sys

#: The standard streams gpudiag was started without (``>&-``, ``2>&-``, ``<&-``): `run`'s
#: program gets them closed too, as plainly (gpudiag.procs.shim).
CLOSED_AT_START: set[int] = set()


def reopen_closed() -> None:
    """A standard stream closed by gpudiag's caller is opened on /dev/null, so that no file
    of gpudiag's takes its number and gpudiag's own output has somewhere to go: a closed
    stdout once ended `gpudiag run` with a traceback before the program ran, a closed
    stderr with a silent exit 1."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            CLOSED_AT_START.add(fd)
    if not CLOSED_AT_START:
        return
    for fd in sorted(CLOSED_AT_START):
        null = os.open(os.devnull, os.O_RDWR)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)
        os.set_inheritable(fd, True)
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        if fd in CLOSED_AT_START or getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, closefd=False, encoding="utf-8",  # noqa: SIM115
                                    errors="backslashreplace"))


