"""Whether a file is an XSpace trace gpudiag can afford to read, told from its protobuf
framing alone, before xprof's reader builds an object per plane, line and event.

xprof's Python reader costs about 50 us and a kilobyte per element it walks, whatever the
element holds, so a file of empty elements costs far more than its size says: a 20 MB
trace of empty planes took 189 s and 7.3 GB. A profiler writes one plane per device and a
few for the host, one line per thread or stream, and never an event without its metadata
id. So a trace is refused, with one line saying which bound, when it holds more than
MAX_PLANES planes, more than MAX_LINES lines, or more than MAX_EMPTY_EVENTS events of no
bytes. The scan reads the fields' tags and lengths only (plane -> line -> event), over the
file's bytes in memory (at most the trace size cap), and stops at the first bound crossed.

XSpace: planes = 1; XPlane: lines = 3; XLine: events = 4 (tensorflow/tsl xplane.proto).
"""

from __future__ import annotations

from collections.abc import Iterator

MAX_PLANES = 1_000
MAX_LINES = 200_000
MAX_EMPTY_EVENTS = 1_000

_PLANES, _LINES, _EVENTS = 1, 3, 4


class Refused(ValueError):
    """The file is not protobuf, or crosses a bound: the message says which (one line)."""


class Bound(Refused):
    """The file crosses one of the bounds."""


def _varint(data: bytes, at: int, end: int) -> tuple[int, int]:
    value = shift = 0
    while at < end and shift < 64:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, at
        shift += 7
    raise Refused(f"byte {at}: not a protobuf field")


def _each(data: bytes, at: int, end: int, wanted: int) -> Iterator[tuple[int, int]]:
    """The (start, end) of each length-delimited field ``wanted`` of the message in
    ``data[at:end]``, one at a time; Refused when its framing is not protobuf's."""
    while at < end:
        start = at
        tag, at = _varint(data, at, end)
        kind = tag & 7
        if tag >> 3 == 0:
            raise Refused(f"byte {start}: not a protobuf field")
        if kind == 0:
            _, at = _varint(data, at, end)
            continue
        if kind == 2:
            length, at = _varint(data, at, end)
        elif kind in (1, 5):
            length = 8 if kind == 1 else 4
        else:
            raise Refused(f"byte {start}: wire type {kind} is not one of XSpace's")
        if at + length > end:
            raise Refused(f"byte {start}: a field runs past the end of "
                          f"{'the file' if end == len(data) else 'its message'} "
                          f"({len(data)} bytes): cut short?")
        if kind == 2 and tag >> 3 == wanted:
            yield at, at + length
        at += length


def _at_most(fields: Iterator[tuple[int, int]], bound: int) -> list[tuple[int, int]]:
    """The fields, ``bound`` + 1 of them at most (more than ``bound``: the caller says
    the bound is crossed)."""
    out = []
    for field in fields:
        out.append(field)
        if len(out) > bound:
            break
    return out


def check(data: bytes) -> None:
    """Refused (one line) unless ``data`` is framed as an XSpace and within the bounds."""
    planes = _at_most(_each(data, 0, len(data), _PLANES), MAX_PLANES)
    if len(planes) > MAX_PLANES:
        raise Bound(f"it holds more than {MAX_PLANES:,} planes, the most gpudiag reads (a "
                      "profiler writes one per device and a few for the host)")
    lines = empty = 0
    for start, end in planes:
        try:
            found = _at_most(_each(data, start, end, _LINES), MAX_LINES - lines)
            lines += len(found)
            if lines > MAX_LINES:
                raise Bound(f"it holds more than {MAX_LINES:,} lines, the most gpudiag "
                              "reads (a profiler writes one per thread or stream)")
            for line_start, line_end in found:
                for a, b in _each(data, line_start, line_end, _EVENTS):
                    empty += a == b
                    if empty > MAX_EMPTY_EVENTS:
                        raise Bound(f"it holds more than {MAX_EMPTY_EVENTS:,} empty events "
                                      "(a profiler writes none: each names its metadata)")
        except Bound:
            raise
        except Refused:
            continue  # a plane whose own framing is not protobuf's: xprof's reader says it
