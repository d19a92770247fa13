"""`gpudiag mcp`'s tools run in a worker process of their own, one call at a time, each
under a time limit and the worker under a memory limit: a file that would cost minutes or
gigabytes (a trace of millions of empty planes, a report of millions of names) ends that
one call with the tool's error, one line, and the next call finds a fresh worker. The
server's lock is held only while its call waits on the worker, so never longer than the
limit.

The worker is started with ``spawn`` (never ``fork``: the server's threads and the SDK's
event loop are not copied), inherits the server's standard streams as they are while it
serves (the SDK has moved stdout's descriptor to stderr, so nothing of the worker's ever
reaches the protocol's stream) and reads nothing but the calls on its pipe. The answers
are gpudiag.mcp.tools' plain dicts; gpudiag's refusals come back as their one line.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import resource
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError

#: The longest one call may take (`gpudiag mcp --call-timeout`): a 256 MB trace, the
#: largest read, is explained in about a minute.
CALL_TIMEOUT_S = 120.0
#: The longest the worker may take to start (its imports), not counted against a call.
STARTUP_TIMEOUT_S = 120.0
#: The address space the worker may use: a trace costs about 5 times its size.
MEMORY_LIMIT_BYTES = 6 * 1024**3


def _serve(conn: Connection, logdir: str, memory_bytes: int) -> None:
    """The worker's loop: a call ``(name, args)`` in, ``("ok", answer)`` or ``("error",
    line)`` out, until the pipe closes."""
    with contextlib.suppress(ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    from gpudiag.errors import GpudiagError
    from gpudiag.mcp import tools
    from gpudiag.rundir.loops import import_reader

    import_reader()  # part of the start, not of the first call reading a loop's scalars
    where = tools.Logdir(Path(logdir))
    conn.send(("ready", None))
    while True:
        try:
            name, args = conn.recv()
        except (EOFError, OSError):
            return
        try:
            reply: tuple[str, Any] = ("ok", getattr(tools, name)(where, *args))
        except GpudiagError as exc:
            reply = ("error", exc.message)
        except MemoryError:
            reply = ("error", f"{name}: needed more than the {memory_bytes / 1024**3:.0f} GiB "
                              "of memory a call may use (not answered)")
        except Exception as exc:  # a value no check foresaw: this call only, said
            reply = ("error", f"{name}: could not be answered ({type(exc).__name__}: "
                              f"{str(exc)[:200]})")
        try:
            conn.send(reply)
        except MemoryError:
            conn.send(("error", f"{name}: the answer is too large to send"))


class Worker:
    """The one worker process of a server (started on the first call, again after a call
    that ran past the limit or that ended it)."""

    def __init__(self, logdir: Path, timeout_s: float = CALL_TIMEOUT_S,
                 memory_bytes: int = MEMORY_LIMIT_BYTES) -> None:
        self.logdir = logdir
        self.timeout_s = timeout_s
        self.memory_bytes = memory_bytes
        self._proc: Any = None
        self._conn: Connection | None = None

    def call(self, name: str, *args: str | bool) -> dict[str, Any]:
        """gpudiag.mcp.tools' ``name`` on the logdir; UsageError (the tool's error) when it
        refuses, runs past the time limit, or its worker ends."""
        conn = self._started()
        conn.send((name, args))
        if not conn.poll(self.timeout_s):
            self.stop()
            raise UsageError(f"{name}: no answer within {self.timeout_s:g} s (stopped; "
                             "gpudiag mcp --call-timeout sets the limit)")
        try:
            kind, value = conn.recv()
        except (EOFError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            self.stop()
            raise UsageError(f"{name}: the call ended its worker (exit {code}; out of "
                             "memory?) and was not answered") from None
        if kind == "error":
            raise UsageError(str(value))
        result: dict[str, Any] = value
        return result

    def _started(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.is_alive():
            return self._conn
        self.stop()
        context = multiprocessing.get_context("spawn")
        ours, theirs = context.Pipe()
        proc = context.Process(target=_serve, name="gpudiag-mcp-worker", daemon=True,
                               args=(theirs, str(self.logdir), self.memory_bytes))
        proc.start()
        theirs.close()
        self._proc, self._conn = proc, ours
        try:  # its start (imports) is not counted against the first call's limit
            ready = ours.poll(STARTUP_TIMEOUT_S) and ours.recv()[0] == "ready"
        except (EOFError, OSError):
            ready = False
        if not ready:
            self.stop()
            raise UsageError(f"gpudiag mcp's worker did not start within {STARTUP_TIMEOUT_S:g} s")
        return ours

    def stop(self) -> None:
        """The worker ended (killed: a call past its limit is never waited for)."""
        proc, conn, self._proc, self._conn = self._proc, self._conn, None, None
        if conn is not None:
            conn.close()
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
