"""`gpudiag tensorboard [LOGDIR]`: open TensorBoard on gpudiag's runs, or check it.

Without LOGDIR: the newest run directory under ``runs/`` that answers a question (a
complete program run or probe, not a `gpudiag diff` record, not a failed run:
gpudiag.rundir.opens_on; else the newest, else ``runs/`` itself). The URL
printed opens the GPUDIAG tab. The logdir and the address are checked first
(gpudiag.tb.serve: one line, exit 2), then TensorBoard starts quietly and gpudiag
prints its URL. ``--check`` starts it the same way, asks every dashboard over HTTP
whether it lists what the run directories promise (gpudiag.tb.check), prints one line
per dashboard and stops it: exit 0 when all pass, 1 otherwise; a run it cannot read
(gpudiag.rundir.scan_runs) is one line and exit 2 before TensorBoard starts. Writes
nothing: no run directory of its own.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpudiag.errors import EXIT_CHECK_FAILED, EXIT_ENVIRONMENT, EXIT_OK
from gpudiag.procs import group
from gpudiag.rundir import RunDirError, scan_runs
from gpudiag.tb import check as tbcheck
from gpudiag.tb import serve as tbserve


def run(logdir: Path | None, *, port: int, host: str, check: bool,
        say: Callable[[str], Any], warn: Callable[[str], Any],
        check_timeout_s: float = 120.0) -> int:
    """Serve (until Ctrl-C) or check; returns the exit code. ``say`` prints to stdout,
    ``warn`` to stderr."""
    chosen = tbserve.default_logdir() if logdir is None else logdir
    exposed = tbserve.check_bind(host, port)
    tbserve.check_logdir(chosen)
    want = _expected(chosen) if check else None
    if exposed:
        warn(f"gpudiag: warning: --host {host} makes TensorBoard reachable from other "
             "machines on your network; it has no authentication")
    server = tbserve.start(chosen, port, host)
    try:
        if want is not None:
            return _check(server, chosen, want, say, check_timeout_s)
        say(f"TensorBoard on {chosen}: {server.url}/#gpudiag (Ctrl-C stops it)")
        group.wait(server.proc)
        warn(f"gpudiag: error: TensorBoard exited ({server.log_tail()})")
        return EXIT_ENVIRONMENT
    except KeyboardInterrupt as exc:
        if int(getattr(exc, "signum", signal.SIGINT)) != signal.SIGINT:
            raise
        say("TensorBoard stopped")
        return EXIT_OK
    finally:
        server.stop()


def _expected(logdir: Path) -> tbcheck.Expected:
    """What the runs promise; RunDirError (one line, exit 2, before TensorBoard starts)
    when a run under ``logdir`` cannot be read: the check would not be whole."""
    _, bad = scan_runs(logdir)
    if bad:
        more = f" (and {len(bad) - 1} more unreadable run(s))" if len(bad) > 1 else ""
        raise RunDirError(f"{bad[0].reason}{more}")
    try:
        return tbcheck.expected(logdir)
    except (ArithmeticError, AttributeError, KeyError, TypeError, ValueError) as exc:
        raise RunDirError(f"{logdir}: a run's report holds a value of another type than "
                          f"gpudiag writes ({type(exc).__name__}: {str(exc)[:120]})") from None


def _check(server: tbserve.Server, logdir: Path, want: tbcheck.Expected,
           say: Callable[[str], Any], timeout_s: float) -> int:

    def get(path: str, body: dict[str, Any] | None = None) -> Any:
        return tbserve.get_json(server.url + path, body)

    verdicts = tbcheck.check(get, want, timeout_s=timeout_s, errors=tbserve.HTTP_ERRORS)
    say(f"TensorBoard on {logdir} ({server.url}/):")
    for v in verdicts:
        say(f"  {'OK  ' if v.ok else 'FAIL'} {v.line}")
    return EXIT_OK if all(v.ok for v in verdicts) else EXIT_CHECK_FAILED
