"""Autograph's generated code, mapped back to the program's source (in-program, on a crash).

A tf.function's Python code runs converted by autograph: a crash while tracing goes
through frames of ``/tmp/__autograph_generated_file<random>.py``. Autograph keeps, on each
converted function, ``ag_source_map``: {LineLocation(generated file, line): OriginInfo(the
original file, line, function, source line)} (tensorflow/python/autograph/impl/api.py,
pyct/origin_info.py). The converted function is found from the frame: the function whose
code the frame runs, or any function of the generated module (nested bodies such as
``if_body`` are created per call). Looked up only when a crash is recorded.
"""

from __future__ import annotations

import gc
from pathlib import PurePath
from types import FrameType, FunctionType
from typing import Any

GENERATED_MARK = "__autograph_generated_file"


def is_generated(filename: str) -> bool:
    return GENERATED_MARK in PurePath(filename).name


def _source_map(frame: FrameType) -> Any:
    for target in (frame.f_code, frame.f_globals):
        for ref in gc.get_referrers(target):
            if isinstance(ref, FunctionType):
                found = getattr(ref, "ag_source_map", None)
                if found:
                    return found
    return None


def origin(frame: FrameType, lineno: int, cache: dict[str, Any]) -> dict[str, Any] | None:
    """{file, line, function, code} in the program's source for a line of generated code,
    or None when autograph's map does not have it."""
    filename = frame.f_code.co_filename
    if filename not in cache:
        cache[filename] = _source_map(frame)
    source_map = cache[filename]
    if not source_map:
        return None
    for loc, info in source_map.items():
        if loc.filename == filename and loc.lineno == lineno:
            return {"file": info.loc.filename, "line": info.loc.lineno,
                    "function": info.function_name,
                    "code": (info.source_code_line or "").strip()}
    return None
