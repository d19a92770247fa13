"""What explains a crash: the catalogue against the whole exception, its causes, then the
TensorFlow log lines printed with it (pure; used by gpudiag.verdicts.run.crash).

TensorFlow's errors often say the cause on a later line: an InvalidArgumentError whose
first line is "Graph execution error:" and whose cause ("You must feed a value for
placeholder tensor ...") is further down, and printed again by the C++ runtime on stderr
("Local rendezvous is aborting with status: ..."). So every line counts, and the line
quoted is the one that matched, not the first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.catalogue import Entry, all_entries
from gpudiag.catalogue.fitinput import SHAPE_ENTRIES
from gpudiag.layout.events import DatasetCall

LOG_LINES_SEARCHED = 400  # the last lines of stderr before the end, where a crash prints


@dataclass(frozen=True)
class CrashCause:
    entry: Entry | None
    line: str  # the line quoted: the one that matched, else the message's first line
    where: str  # "message" | "code" | "cause" | "log" | "" (nothing matched)


def _line_of(text: str, start: int) -> str:
    begin = text.rfind("\n", 0, start) + 1
    end = text.find("\n", start)
    return text[begin:end if end >= 0 else None].strip()


def _search(text: str) -> tuple[Entry, str] | None:
    for e in all_entries():
        if e.kind != "crash":
            continue
        m = e.search(text)
        if m is not None:
            return e, _line_of(text, m.start())
    return None


def _first_line(message: str) -> str:
    lines = [ln.strip() for ln in message.strip().splitlines() if ln.strip()]
    return lines[0] if lines else ""


def explain(error_type: str, message: str, causes: Sequence[dict[str, Any]] = (),
            log_lines: Sequence[str] = (), code: str = "") -> CrashCause:
    """The catalogue entry for a crash and the line to quote. An exception with no
    message (a bare ``assert``) is searched as ``Type at `code```, the program's line
    that raised it."""
    found = _search(f"{error_type}: {message}")
    if found:
        line = found[1].removeprefix(f"{error_type}: ")
        return CrashCause(found[0], line, "message")
    if not message.strip() and code:
        found = _search(f"{error_type} at `{code.strip()}`")
        if found:
            return CrashCause(found[0], f"(no message) at `{code.strip()}`", "code")
    for c in causes:
        found = _search(f"{c.get('type', '')}: {c.get('message', '')}")
        if found:
            return CrashCause(found[0], found[1], "cause")
    for line in list(log_lines)[-LOG_LINES_SEARCHED:]:
        found = _search(line)
        if found:
            return CrashCause(found[0], found[1], "log")
    return CrashCause(None, _first_line(message), "")


def _frame(caller: dict[str, Any] | None) -> tuple[Any, Any]:
    """A frame's file and line: a function a map traces through autograph records the
    map's own line as its caller (autograph's generated code is not the program's)."""
    return (caller or {}).get("file"), (caller or {}).get("line")


def shape_lost_at(entry: Entry | None, calls: Sequence[DatasetCall]
                  ) -> tuple[DatasetCall, str] | None:
    """For a crash of a dataset's unknown shapes (fitinput.SHAPE_ENTRIES): where the
    program's pipeline lost them, the first call that made its output's shapes less known
    than its input's, and the text naming it with the tf.py_function / tf.numpy_function
    its function calls; None where the crash is another or no call was seen losing them."""
    if entry is None or entry.id not in SHAPE_ENTRIES:
        return None
    lost = next((c for c in calls if c.shape_lost), None)
    if lost is None:
        return None
    fn = lost.function or {}
    inner = next((c for c in calls if c.method in ("py_function", "numpy_function") and
                  c.caller and (_frame(c.caller) == _frame(lost.caller) or (
                      c.caller.get("function") == fn.get("name") and
                      c.caller.get("file") == fn.get("file")))), None)
    code = (lost.caller or {}).get("code") or ""
    text = f"the shapes were lost at {lost.where}" + (f" (`{code[:80]}`)" if code else "")
    text += f": Dataset.{lost.method}"
    if inner is not None:
        text += f" of {fn.get('name') or 'a function'} through tf.{inner.method}(" \
            f"{(inner.function or {}).get('name') or '...'})"
    return lost, text + f" makes elements of shapes {lost.shape_lost}"
