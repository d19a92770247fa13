"""A TensorBoard server for `gpudiag tensorboard`: checked, started quietly, read over HTTP.

TensorBoard is ``python -m tensorboard.main`` in a process group of its own
(gpudiag.procs: it never outlives gpudiag). Importing TensorFlow, which TensorBoard's
profile plugin does, prints TensorFlow's device start-up lines (on a machine without a
GPU, an alarming ``failed call to cuInit``); they are kept out of the user's terminal:
the server runs with ``TF_CPP_MIN_LOG_LEVEL=3`` and its output goes to a log file,
shown only when the server fails. gpudiag prints the URL itself, from the line
TensorBoard announces it with.

Before anything starts, the logdir and the address are checked (``check_logdir``,
``check_bind``): a missing logdir, one without event files, an empty or unknown host,
a port in use are one line and exit 2. Nothing binds to anything but localhost unless
``--host`` says so. No TensorFlow in this process.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.errors import EnvironmentBroken, UsageError
from gpudiag.procs import group as procs
from gpudiag.procs import stops

EVENTS_GLOB = "events.out.tfevents.*"
START_TIMEOUT_S = 180.0  # importing TensorFlow on a loaded 2-core machine takes a while
_URL_LINE = re.compile(r"TensorBoard \S+ at (http://\S+?)/? \(Press CTRL\+C to quit\)")


def default_logdir(runs: Path = Path("runs")) -> Path:
    """What `gpudiag tensorboard` opens without an argument: the newest run directory under
    ``runs`` that answers a question (gpudiag.rundir.opens_on: a complete program
    run or probe, not a `gpudiag diff` record, not a failed, interrupted or running run),
    else the newest run directory (layout.newest_run_dir), else ``runs``."""
    from gpudiag.rundir import RunDirError, list_runs, opens_on

    try:
        chosen = opens_on(list_runs(runs))
    except RunDirError:
        chosen = None
    return chosen.path if chosen else (layout.newest_run_dir(runs) or runs)


def check_logdir(logdir: Path) -> None:
    """UsageError (exit 2, one line) unless ``logdir`` is a directory with event files."""
    if not logdir.exists():
        raise UsageError(f"logdir {logdir} does not exist")
    if not logdir.is_dir():
        raise UsageError(f"logdir {logdir} is not a directory")
    if next(logdir.rglob(EVENTS_GLOB), None) is None:
        raise UsageError(f"logdir {logdir} has no TensorBoard event files: run a gpudiag "
                         "command with --logdir there first")


def check_bind(host: str, port: int) -> bool:
    """Check, before TensorBoard starts, that it can listen on ``host``:``port``; True when
    that address is reachable from other machines (not loopback). UsageError (exit 2, one
    line) for an empty or unknown host and for a port already in use."""
    import errno
    import ipaddress
    import socket

    if not host.strip():
        raise UsageError("--host is empty: give an interface such as localhost (the default)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                   flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise UsageError(f"--host {host}: not an address of this machine ({exc})") from exc
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise UsageError(f"--port {port} on {host} is already in use; pick another "
                                 "or --port 0 for any free one") from exc
            raise UsageError(f"--host {host}: cannot listen there ({exc.strerror})") from exc
    return not all(ipaddress.ip_address(str(info[4][0]).split("%")[0]).is_loopback
                   for info in infos)


def tensorboard_argv(logdir: Path, port: int, host: str) -> list[str]:
    """The TensorBoard command line gpudiag runs (bound to ``host``, localhost by default)."""
    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
            "--port", str(port), "--host", host]


def quiet_env() -> dict[str, str]:
    """TensorBoard's environment: TensorFlow's C++ log lines off (its Python import still
    runs: the profile plugin needs it)."""
    return {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONUNBUFFERED": "1"}


@dataclass
class Server:
    """A running TensorBoard: its process, the URL it announced, its log file."""

    proc: subprocess.Popen[bytes]
    url: str
    log_path: Path

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        return " | ".join(text.strip().splitlines()[-lines:])

    def stop(self, *, keep_log: bool = False) -> None:
        procs.stop_group(self.proc)
        if not keep_log:
            self.log_path.unlink(missing_ok=True)


def start(logdir: Path, port: int, host: str, *,
          timeout_s: float = START_TIMEOUT_S) -> Server:
    """Start TensorBoard and wait for its URL. EnvironmentBroken (exit 3) when it exits or
    announces nothing in ``timeout_s``; its log's last lines are in the message."""
    fd, name = tempfile.mkstemp(prefix="gpudiag-tensorboard-", suffix=".log")
    log_path = Path(name)
    with os.fdopen(fd, "wb") as log:
        proc = procs.spawn(tensorboard_argv(logdir, port, host), stdin=subprocess.DEVNULL,
                           stdout=log, stderr=log, env=quiet_env())
    server = Server(proc, "", log_path)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _URL_LINE.search(log_path.read_text(encoding="utf-8", errors="replace"))
        if found:
            server.url = found.group(1)
            return server
        if proc.poll() is not None:
            break
        try:
            stops.check()  # a stop request a callback dropped: acted on while it starts
            time.sleep(0.2)
        except BaseException:  # Ctrl-C, SIGTERM: the server is not returned: ended here
            server.stop()
            raise
    why = "exited" if proc.poll() is not None else f"gave no URL in {timeout_s:.0f} s"
    tail = server.log_tail()
    server.stop(keep_log=True)
    raise EnvironmentBroken(f"TensorBoard {why} (its log, {log_path}: {tail})")


def get_json(url: str, body: dict[str, Any] | None = None, timeout_s: float = 60.0) -> Any:
    """GET (or, with ``body``, POST as JSON) ``url`` and parse the JSON answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={
        "Content-Type": "application/json", "X-XSRF-Protected": "1"})
    with urllib.request.urlopen(request, timeout=timeout_s) as resp:
        raw = resp.read()
        if resp.headers.get("Content-Encoding") == "gzip":  # the profile plugin's answers
            raw = gzip.decompress(raw)
        return json.loads(raw.decode("utf-8"))


#: What a read of a starting or failing server can raise.
HTTP_ERRORS = (urllib.error.URLError, OSError, ValueError)
