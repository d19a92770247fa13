"""TensorBoard writing in the parent process (no TensorFlow) and the launcher.

Text, scalars and PNG images are written as ordinary TensorBoard event files with
tensorboard's own summary builders (the plugins' TF-free ``*_pb`` functions and
metadata) and record framing (``RecordWriter``), so `gpudiag monitor` and the report
writer work where TensorFlow is absent. Every summary is a plugin tensor, the form
``tf.summary`` writes in the training child, so a reader reads every tag the same way
(EventAccumulator's ``Tensors``; gpudiag/layout.py). tensorboard's ``EventFileWriter``
and ``tensorboard.summary.Writer`` are not used: they reach files through
``tensorboard.compat.tf``, which imports the whole of TensorFlow whenever it is installed
(seconds of start-up and its log noise in the parent). Nor is ``tensorboard.summary.v1``:
importing it imports TensorFlow too.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from pathlib import Path
from typing import Any

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

_file_counter = itertools.count()


class EventWriter:
    """A new event file in one TensorBoard run directory. A context manager."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_file_counter)}.gpudiag")
        self.path = run_dir / name
        self._writer = RecordWriter(self.path.open("wb"))
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def _write(self, event: event_pb2.Event) -> None:
        self._writer.write(event.SerializeToString())

    def _emit(self, summary: summary_pb2.Summary, step: int, wall_time: float | None) -> None:
        self._write(event_pb2.Event(wall_time=wall_time or time.time(), step=int(step),
                                    summary=summary))

    def text(self, tag: str, markdown: str, step: int = 0) -> None:
        """A text summary; TensorBoard's Text tab renders it as markdown."""
        self._emit(text_pb(tag, markdown), step, None)

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """A scalar (a float32 scalar-plugin tensor, as ``tf.summary.scalar`` writes)."""
        self._emit(scalar_pb(tag, float(value)), step, wall_time)

    def png(self, tag: str, png_bytes: bytes, width: int, height: int, step: int = 0) -> None:
        """A PNG image for TensorBoard's Images tab: the image plugin's string tensor
        ``[width, height, png]``, as ``tf.summary.image`` writes it."""
        summary = summary_pb2.Summary()
        meta = image_metadata.create_summary_metadata(display_name=tag, description="")
        tensor = tensor_util.make_tensor_proto([str(width).encode(), str(height).encode(),
                                               png_bytes])
        summary.value.add(tag=tag, metadata=meta, tensor=tensor)
        self._emit(summary, step, None)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def tensorboard_argv(logdir: Path, port: int, host: str) -> list[str]:
    """The TensorBoard command line gpudiag runs (bound to ``host``, localhost by default)."""
    import sys

    return [sys.executable, "-m", "tensorboard.main", "--logdir", str(logdir),
            "--port", str(port), "--host", host]


def check_bind(host: str, port: int) -> bool:
    """Check, before TensorBoard starts, that it can listen on ``host``:``port``; True when
    that address is reachable from other machines (not loopback). UsageError (exit 2, one
    line) for an empty or unknown host and for a port already in use."""
    import errno
    import ipaddress
    import socket

    from gpudiag.errors import UsageError

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
