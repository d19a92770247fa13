"""A Python traceback printed on the program's stderr, read back from the saved text (pure).

The hooks record an uncaught exception through ``sys.excepthook`` and the exit handler;
a program that puts in its own excepthook and leaves with ``os._exit(1)`` (a common way
to stop a job whose threads would hang the exit) bypasses both, yet its traceback is in
its stderr. ``last_traceback`` finds the last one there, in Python's own format::

    Traceback (most recent call last):
      File "train.py", line 12, in main
        model.fit(x)
    ValueError: ...
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_HEAD = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s+File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>.+)$')
_EXCEPTION = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<message>.*))?$")
# Not the program's own code: an installed package or the standard library.
_LIBRARY = re.compile(r"[/\\](?:site-packages|dist-packages|lib[/\\]python\d[\d.]*)[/\\]")


@dataclass(frozen=True)
class PrintedTraceback:
    type: str  # the exception's class, as printed (``ValueError``, ``tf.errors...``)
    message: str
    frames: list[dict[str, Any]] = field(default_factory=list)  # innermost last

    @property
    def user_frame(self) -> dict[str, Any] | None:
        return next((f for f in reversed(self.frames) if f["user"]), None)


def last_traceback(lines: Sequence[str]) -> PrintedTraceback | None:
    """The last complete traceback in ``lines`` (None: none, or one cut off before its
    exception line)."""
    start = max((i for i, ln in enumerate(lines) if ln.rstrip() == _HEAD), default=None)
    if start is None:
        return None
    frames: list[dict[str, Any]] = []
    for ln in lines[start + 1:]:
        ln = ln.rstrip("\r")
        m = _FRAME.match(ln)
        if m is not None:
            frames.append({"file": m["file"], "line": int(m["line"]),
                           "function": m["function"], "code": "",
                           "user": _LIBRARY.search(m["file"]) is None})
            continue
        if ln.startswith((" ", "\t")) or not ln:
            if frames and ln.strip() and not frames[-1]["code"] and \
                    not set(ln.strip()) <= set("^~ "):
                frames[-1]["code"] = ln.strip()
            continue
        e = _EXCEPTION.match(ln)
        if e is None or not frames:
            return None
        return PrintedTraceback(e["type"], (e["message"] or "").strip(), frames)
    return None
