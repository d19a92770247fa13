"""Which source files are the program's own code (not Python's, a library's or gpudiag's).

Used to tell the program's step functions from TensorFlow's and Keras's own tf.functions,
and to find the frame of a crash in the program's code.
"""

from __future__ import annotations

import contextlib
import os
import site
import sys
import sysconfig
import traceback
from functools import lru_cache
from pathlib import Path
from types import TracebackType
from typing import Any

_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_HOOKS_DIR = str(Path(__file__).resolve().parent)  # gpudiag/run: the hooks themselves


@lru_cache(maxsize=1)
def _library_roots() -> tuple[str, ...]:
    roots = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        path = sysconfig.get_paths().get(key)
        if path:
            roots.add(os.path.realpath(path))
    with contextlib.suppress(AttributeError):  # some virtualenv versions' site module
        roots.update(os.path.realpath(p) for p in site.getsitepackages())
    user = getattr(site, "USER_SITE", None)
    if user:
        roots.add(os.path.realpath(user))
    roots.add(os.path.realpath(_HOOKS_DIR))
    roots.add(os.path.realpath(sys.base_prefix))
    roots.add(os.path.realpath(sys.prefix))
    return tuple(sorted(roots))


@lru_cache(maxsize=4096)
def is_user_file(filename: str) -> bool:
    """True for the program's own source files (and ``python -c`` code)."""
    if filename in ("<string>", "<stdin>"):
        return True
    if not filename or filename.startswith("<"):
        return False
    if any(m in filename for m in _LIBRARY_MARKERS):
        return False
    path = os.path.realpath(filename)
    return not any(path == root or path.startswith(root + os.sep) for root in _library_roots())


def frames(tb: TracebackType | None, limit: int = 40) -> list[dict[str, Any]]:
    """The traceback's frames as plain dicts, innermost last, each marked user or not."""
    out = []
    for fs in traceback.extract_tb(tb)[-limit:]:
        out.append({"file": fs.filename, "line": fs.lineno, "function": fs.name,
                    "code": (fs.line or "").strip(), "user": is_user_file(fs.filename)})
    return out


def user_frame(frame_list: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost frame in the program's own code."""
    for fs in reversed(frame_list):
        if fs["user"]:
            return fs
    return None
