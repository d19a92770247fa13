"""The watchdog behind gpudiag.procs: ``python -m gpudiag.procs.reaper``, fed on standard input.

Reads lines ``+PGID`` (watch this process group) and ``-PGID`` (forget it) from a pipe
whose write end only gpudiag holds. End-of-file means gpudiag has gone, whichever way
(``kill -9`` included): every group still watched gets SIGTERM, then SIGKILL after
GRACE_S, and the watchdog exits. It runs in a session of its own and ignores SIGINT,
SIGTERM and SIGHUP, so the signal that ended gpudiag does not end it first.

Imports nothing of gpudiag's or TensorFlow's: it starts in tens of milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time

WATCH = "+"
UNWATCH = "-"
GRACE_S = 3.0
_POLL_S = 0.05


def group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` still has a member (signal 0 probes without sending)."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def signal_groups(pgids: set[int], sig: int) -> None:
    for pgid in pgids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, sig)


def end_groups(pgids: set[int], grace_s: float = GRACE_S) -> None:
    """SIGTERM every group, wait up to ``grace_s`` for them to go, SIGKILL the rest."""
    signal_groups(pgids, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        pgids = {p for p in pgids if group_alive(p)}
        if not pgids:
            return
        time.sleep(_POLL_S)
    signal_groups(pgids, signal.SIGKILL)


def main() -> int:
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)
    watched: set[int] = set()
    for raw in sys.stdin.buffer:
        line = raw.decode("ascii", "replace").strip()
        if len(line) < 2 or not line[1:].isdigit():
            continue
        pgid = int(line[1:])
        if line[0] == WATCH:
            watched.add(pgid)
        elif line[0] == UNWATCH:
            watched.discard(pgid)
    end_groups({p for p in watched if group_alive(p)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
