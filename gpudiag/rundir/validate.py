"""What load_run hands out matches the schema: report.json's fields of their types, no
nesting deeper than MAX_DEPTH, no NaN or Infinity (Python's JSON reader accepts them;
gpudiag never writes them), the evidence the step breakdown reads of numbers.

``problem(data)`` names the first field that does not fit (``findings[2].evidence`` is
not an object ...), None when all fit. Pure: plain data in. Walks iteratively, so a
deep report costs no recursion.
"""

from __future__ import annotations

import math
from typing import Any

from gpudiag.report import STATUSES

MAX_DEPTH = 64
#: data's sections are objects (session.set), but for these of another type (the signal's
#: name; a cluster report's task list, gpudiag.run.tasks)
_DATA_SCALARS: dict[str, type] = {"interrupted_by": str, "tasks": list}
_TOP: dict[str, tuple[type, ...]] = {
    "command": (str,), "started_at": (str,), "finished_at": (str, type(None)),
    "partial": (bool,), "interrupted": (bool,), "argv": (list,), "run_dir": (str,),
    "environment": (dict,), "devices": (dict,), "findings": (list,), "data": (dict,),
    "gpudiag_version": (str,)}
_FINDING: dict[str, tuple[type, ...]] = {"id": (str,), "status": (str,), "message": (str,),
                                         "evidence": (dict,), "advice": (str,)}
_NAMES = {str: "a string", bool: "true or false", list: "a list", dict: "an object",
          type(None): "null"}


def deep_or_not_finite(data: Any) -> str | None:
    """The first value nested deeper than MAX_DEPTH, or not finite; None: none."""
    todo: list[tuple[Any, str, int]] = [(data, "", 0)]
    while todo:
        value, where, depth = todo.pop()
        if depth > MAX_DEPTH:
            return f"{where or 'the report'} nests deeper than {MAX_DEPTH}"
        if isinstance(value, float) and not math.isfinite(value):
            return f"{where} is {value} (JSON has no such number)"
        if isinstance(value, dict):
            todo += [(v, f"{where}.{k}" if where else str(k), depth + 1)
                     for k, v in value.items()]
        elif isinstance(value, list):
            todo += [(v, f"{where}[{i}]", depth + 1) for i, v in enumerate(value)]
    return None


def _typed(value: Any, want: tuple[type, ...], where: str) -> str | None:
    if isinstance(value, want) and (bool in want or not isinstance(value, bool)):
        return None
    shown = repr(value)[:40] if value is None or isinstance(value, bool | int | float) \
        else type(value).__name__
    return f"{where} is {shown}, not {' or '.join(_NAMES[t] for t in want)}"


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _breakdown(i: int, evidence: dict[str, Any]) -> str | None:
    """A bottleneck finding's evidence as gpudiag.rundir.records.Run.breakdown reads it."""
    where = f"findings[{i}].evidence"
    parts = evidence.get("parts_s")
    if parts is not None:
        if not isinstance(parts, dict):
            return f"{where}.parts_s is not an object"
        for device, p in parts.items():
            if not isinstance(p, dict):
                continue
            for name, v in p.items():
                if name.endswith("_s") and v is not None and not _number(v):
                    return f"{where}.parts_s.{device}.{name} is not a number"
    if evidence.get("step_s") is not None and not _number(evidence["step_s"]):
        return f"{where}.step_s is not a number"
    causes = evidence.get("causes")
    if causes is not None and not (isinstance(causes, list)
                                   and all(isinstance(c, str) for c in causes)):
        return f"{where}.causes is not a list of strings"
    return None


def problem(data: dict[str, Any]) -> str | None:
    """The first field of report.json ``data`` that does not fit; None when all fit."""
    version = data.get("schema_version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        return f"schema_version is {version!r}, not a version number (1 or above)"
    for name, want in _TOP.items():
        if name in data and (found := _typed(data[name], want, name)):
            return found
    if not data.get("command"):
        return "command is empty"
    if not all(isinstance(a, str) for a in data.get("argv") or []):
        return "argv is not a list of strings"
    for i, f in enumerate(data.get("findings") or []):
        if not isinstance(f, dict):
            return f"findings[{i}] is {type(f).__name__}, not an object"
        for name, want in _FINDING.items():
            if name in f and (found := _typed(f[name], want, f"findings[{i}].{name}")):
                return found
        if f.get("status") not in STATUSES:
            return f"findings[{i}].status is {str(f.get('status'))[:40]!r}, not one of " \
                   f"{', '.join(STATUSES)}"
        if "bottleneck" in str(f.get("id")) and (found := _breakdown(i, f.get("evidence")
                                                                     or {})):
            return found
    for key, value in (data.get("data") or {}).items():
        kind = _DATA_SCALARS.get(key, dict)
        if not isinstance(value, kind):
            return f"data.{key} is {type(value).__name__}, not {_NAMES[kind]}"
    return deep_or_not_finite(data)
