"""What load_run hands out matches the schema: report.json's fields of their types, no
nesting deeper than MAX_DEPTH, no NaN or Infinity (Python's JSON reader accepts them;
gpudiag never writes them), the evidence the step breakdown reads of numbers.

``problem(data)`` names the first field that does not fit (``findings[2].evidence`` is
not an object ...), None when all fit. Pure: plain data in. Walks iteratively, so a
deep report costs no recursion.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
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


_LEAVES = frozenset({str, int, bool, type(None)})


def _items(value: dict[Any, Any] | list[Any]) -> Iterator[tuple[Any, Any]]:
    return iter(value.items()) if isinstance(value, dict) else enumerate(value)


def _where(trail: list[Any], key: Any) -> str:
    """The path of a value, built only when it is told (``data.x[3]``), cut to a line."""
    out = ""
    for k in [*trail, key]:
        out += f"[{k}]" if type(k) is int else f".{str(k)[:60]}" if out else str(k)[:60]
    return out if len(out) <= 160 else f"{out[:80]}...{out[-60:]}"


_NUMBERS = frozenset({int, float})


def _plain(value: dict[Any, Any] | list[Any]) -> bool:
    """Whether every item of ``value`` is a leaf (no container, no NaN or infinity), told
    at C speed (a list of 14 million numbers in a fraction of a second); False: walk it."""
    values = value.values() if type(value) is dict else value
    kinds = set(map(type, values))
    if kinds <= _LEAVES:
        return True
    if kinds <= _NUMBERS:
        try:
            return all(map(math.isfinite, values))
        except OverflowError:  # an integer beyond a float's range: walked
            return False
    return False


def deep_or_not_finite(data: Any) -> str | None:
    """The first value nested deeper than MAX_DEPTH, or not finite; None: none. One pass,
    iterative, its extra memory the depth (a path is built for the one value told)."""
    if not isinstance(data, dict | list):
        return None if not isinstance(data, float) or math.isfinite(data) else \
            f"the report is {data} (JSON has no such number)"
    stack = [_items(data if not _plain(data) else [])]
    trail: list[Any] = []  # the key of each open container below the top
    while stack:
        for key, value in stack[-1]:
            kind = type(value)
            if kind in _LEAVES:
                continue
            if kind is float:
                if not math.isfinite(value):
                    return f"{_where(trail, key)} is {value} (JSON has no such number)"
            elif (kind is dict or kind is list or isinstance(value, dict | list)) and value \
                    and not (len(stack) < MAX_DEPTH and _plain(value)):
                if len(stack) >= MAX_DEPTH:
                    return f"{_where(trail, key)} nests deeper than {MAX_DEPTH}"
                trail.append(key)
                stack.append(_items(value))
                break
        else:
            stack.pop()
            if trail:
                trail.pop()
    return None


def _fits(value: Any, want: tuple[type, ...]) -> bool:
    return isinstance(value, want) and (bool in want or not isinstance(value, bool))


def _typed(value: Any, want: tuple[type, ...], where: str) -> str | None:
    if _fits(value, want):
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
            if name in f and not _fits(f[name], want):
                return _typed(f[name], want, f"findings[{i}].{name}")
        if f.get("status") not in STATUSES:
            return f"findings[{i}].status is {str(f.get('status'))[:40]!r}, not one of " \
                   f"{', '.join(STATUSES)}"
        if "bottleneck" in str(f.get("id")) and (found := _breakdown(i, f.get("evidence")
                                                                     or {})):
            return found
    for key, value in (data.get("data") or {}).items():
        kind = _DATA_SCALARS.get(key, dict)
        if not isinstance(value, kind):
            return f"data.{str(key)[:60]} is {type(value).__name__}, not {_NAMES[kind]}"
    return deep_or_not_finite(data) or _explain((data.get("data") or {}).get("explain"))


def _explain(explain: Any) -> str | None:
    """data.explain as the step series of an `explain` run read it (gpudiag.rundir.loops):
    traces, each an object whose devices are objects whose steps are objects with a
    period_s of a number."""
    if not isinstance(explain, dict):
        return None
    traces = explain.get("traces")
    if traces is None:
        return None
    if not isinstance(traces, list):
        return f"data.explain.traces is {type(traces).__name__}, not a list"
    for i, t in enumerate(traces):
        where = f"data.explain.traces[{i}]"
        if not isinstance(t, dict):
            return f"{where} is {type(t).__name__}, not an object"
        devices = t.get("devices")
        if devices is None:
            continue
        if not isinstance(devices, list) or not all(isinstance(d, dict) for d in devices):
            return f"{where}.devices is not a list of objects"
        for j, d in enumerate(devices):
            steps = d.get("steps")
            if steps is not None and not (isinstance(steps, list) and all(
                    isinstance(s, dict) and (s.get("period_s") is None
                                             or _number(s["period_s"])) for s in steps)):
                return f"{where}.devices[{j}].steps is not a list of objects with a " \
                       "period_s of a number or null"
    return None
