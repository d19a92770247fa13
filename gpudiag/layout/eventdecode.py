"""Reading an events line back (the protocol: layout/events.py): :func:`check`
(:func:`decode`) never raises. A line of a kind this gpudiag does not know, or of a newer
protocol version, becomes an :class:`~gpudiag.layout.events.Unknown`; a field missing (a
file of an older gpudiag) takes the field's default; a field of another shape than its
annotation's, inner types included (a list of dicts where strings belong), or a line
nested deeper than :data:`MAX_DEPTH`, makes the line a :class:`BadLine` with the field's
name: that line is unreadable, the others are read.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import Any

from gpudiag.layout import events as ev
from gpudiag.layout import loopevents  # noqa: F401  (its kinds register themselves in KINDS)
from gpudiag.layout.events import HEADER, PROTOCOL_VERSION, WIRE_NAMES, Recorded, Unknown

#: Every kind this gpudiag reads, by its name on the line (each registers itself).
KINDS = ev.KINDS


#: The deepest nesting a line may hold (gpudiag's own lines: under 10). A deeper line is
#: unreadable: every reader after decode may recurse over what it holds.
MAX_DEPTH = 32

_HINTS: dict[type, dict[str, Any]] = {}


@dataclass(frozen=True)
class BadLine:
    """A line that is not an event this gpudiag can read, and why (the first field that
    does not fit, named ``kind.field``)."""

    reason: str


class _Misfit(Exception):
    """A value that does not have its annotation's shape (where: the field's path)."""

    def __init__(self, where: str, want: str) -> None:
        super().__init__(f"{where} is not {want}")


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: a deep value never recurses here)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                              else item)]
    return deepest


def _name(hint: Any) -> str:
    plain = isinstance(hint, type) and typing.get_origin(hint) is None
    return hint.__name__ if plain else str(hint).replace("typing.", "")


# the JSON values a scalar field takes (a bool is no number)
_SCALARS: dict[Any, Callable[[Any], bool]] = {
    type(None): lambda v: v is None,
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
}


def _check(value: Any, hint: Any, where: str) -> None:
    """Raise _Misfit unless the JSON ``value`` has the shape of ``hint``, inner types
    included (every element of a list, every key and value of a dict)."""
    if hint is Any:
        return
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [h for h in typing.get_args(hint) if h is not type(None) or value is None]
        if len(arms) == 1:  # X | None holding a value: X's reason, the inner field named
            _check(value, arms[0], where)
            return
        if any(_fits(value, h) for h in arms):
            return
        raise _Misfit(where, _name(hint))
    ok = True
    if hint in _SCALARS:
        ok = _SCALARS[hint](value)
    elif origin in (list, tuple):
        if not isinstance(value, list):
            raise _Misfit(where, _name(hint))
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        for i, item in enumerate(value):
            _check(item, inner, f"{where}[{i}]")
    elif origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _Misfit(where, _name(hint))
        _, inner = typing.get_args(hint) or (str, Any)
        for k, item in value.items():
            _check(item, inner, f"{where}.{k}")
    else:
        ok = isinstance(value, origin or hint)
    if not ok:
        raise _Misfit(where, _name(hint))


def _fits(value: Any, hint: Any) -> bool:
    try:
        _check(value, hint, "")
    except _Misfit:
        return False
    return True


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    """``cls`` from a JSON object: a field missing (or null where the field cannot be
    null: a file of an older gpudiag) takes its default; a field present of another
    shape raises _Misfit."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        name = WIRE_NAMES.get(f.name, f.name)
        if name not in data or (data[name] is None and not _fits(None, hints[f.name])):
            continue  # its default
        value = data[name]
        if f.name == "rows":
            if not isinstance(value, list):
                raise _Misfit(f"{where}.rows", "a list")
            row_cls = typing.get_args(hints["rows"])[0]
            rows = []
            for i, r in enumerate(value):
                if not isinstance(r, dict) or not _fits(r.get("i"), int):
                    raise _Misfit(f"{where}.rows[{i}]", "a row with its index i")
                rows.append(_build(row_cls, r, f"{where}.rows[{i}]"))
            value = tuple(rows)
        else:
            _check(value, hints[f.name], f"{where}.{name}")
        values[f.name] = value
    return cls(**values)


def check(obj: Any) -> Recorded | BadLine:
    """A parsed JSON line as a Recorded event, or why it is none (no kind or pid, a field
    of another shape, too deep). Never raises."""
    try:
        return _check_event(obj)
    except Exception as exc:  # a value no check foresaw: still never an exception
        return BadLine(f"{type(exc).__name__}: {str(exc)[:120]}")


def _check_event(obj: Any) -> Recorded | BadLine:
    if not isinstance(obj, dict):
        return BadLine(f"a JSON {type(obj).__name__}, not an object")
    if not isinstance(obj.get("kind"), str) or not _fits(obj.get("pid"), int):
        return BadLine("no kind or pid")
    kind: str = obj["kind"][:60]
    if _depth(obj) > MAX_DEPTH:
        return BadLine(f"{kind}: nested deeper than {MAX_DEPTH}")
    version = obj.get("v", PROTOCOL_VERSION)
    if not _fits(version, int):
        return BadLine(f"{kind}.v is not an int")
    if obj.get("seq") is not None and not _fits(obj["seq"], int):
        return BadLine(f"{kind}.seq is not an int")
    if obj.get("t") is not None and not _fits(obj["t"], float):
        return BadLine(f"{kind}.t is not a number")
    seq: int = obj.get("seq") or 0
    t = obj.get("t")
    cls = KINDS.get(obj["kind"])
    if cls is None or version > PROTOCOL_VERSION:
        return Recorded(obj["pid"], seq, t, Unknown(
            kind=kind, version=version,
            fields={k: v for k, v in obj.items() if k not in HEADER}))
    try:
        event = _build(cls, obj, kind)
    except _Misfit as exc:
        return BadLine(str(exc))
    return Recorded(obj["pid"], seq, t, event)


def decode(obj: Any) -> Recorded | None:
    """A parsed JSON line as a Recorded event; None when it is none (:func:`check` says
    why). Never raises."""
    found = check(obj)
    return found if isinstance(found, Recorded) else None


def check_line(line: str | bytes) -> Recorded | BadLine:
    """One line of an events file, or why it is no event (not JSON, too deep for JSON's
    reader, no event). Never raises."""
    try:
        obj = json.loads(line)
    except RecursionError:
        return BadLine(f"nested deeper than {MAX_DEPTH}")
    except ValueError as exc:  # UnicodeDecodeError included
        return BadLine(f"not JSON ({str(exc).splitlines()[0][:80]})")
    return check(obj)


def decode_line(line: str | bytes) -> Recorded | None:
    """One line of an events file (None: not JSON, or no event)."""
    found = check_line(line)
    return found if isinstance(found, Recorded) else None
