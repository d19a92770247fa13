"""The gate every child of gpudiag passes: ``python -I -S gate.py GO_FD ERR_FD ARGV...``.

gpudiag.procs.group starts this small process (stdlib only, no site: tens of
milliseconds) as the leader of the child's new session and process group. It waits for
one byte on GO_FD, written once the watchdog (gpudiag.procs.reaper) has been told the
group, then executes ARGV in its place: same pid, same group, same standard streams.
So no child runs before the watchdog can end it; a ``kill -9`` of gpudiag between the
fork and the telling closes GO_FD's other end, and the gate exits without running ARGV.

An ARGV that cannot be executed writes its errno to ERR_FD (close-on-exec: end-of-file
alone means the exec worked), for ``spawn`` to raise the OSError that ``Popen`` would.
The signals Python sets for itself at start (SIGPIPE, SIGXFSZ ignored) are put back to the
default first, as ``subprocess`` gives them.
"""

from __future__ import annotations

import os
import signal
import sys


def main(args: list[str]) -> None:
    go_fd, err_fd, argv = int(args[0]), int(args[1]), args[2:]
    os.set_inheritable(err_fd, False)
    go = os.read(go_fd, 1)
    os.close(go_fd)
    if not go:  # gpudiag is gone before it told the watchdog: run nothing
        os._exit(1)
    try:
        for sig in (signal.SIGPIPE, getattr(signal, "SIGXFSZ", signal.SIGPIPE)):
            signal.signal(sig, signal.SIG_DFL)
        os.execvp(argv[0], argv)
    except OSError as exc:
        os.write(err_fd, str(exc.errno or 0).encode())
    os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
