"""Which source files are the program's own code (not Python's, a library's or gpudiag's).

Used to tell the program's step functions from TensorFlow's and Keras's own tf.functions,
and to find the frame of a crash in the program's code. Decided by where the code was
loaded from, wherever that is (dd-trace-py's ModuleWatchdog decides by origin too):

- the interpreter's own directories (the standard library, site-packages, the user site)
  and gpudiag's hooks;
- the packages of TensorFlow, Keras, tf_keras, absl and their dependencies, from the
  modules actually imported (their ``__file__``): tf_keras installed with ``pip install
  --target DIR`` and put on PYTHONPATH is still tf_keras;
- any installed distribution, wherever it lies: a file whose top-level package directory
  has its ``<name>-<version>.dist-info`` (or ``.egg-info``) beside it, as every pip
  install leaves (``--target`` and ``--prefix`` included);
- autograph's generated files (``__autograph_generated_file*.py``): never the program's
  own; a crash frame in them is mapped to the source it came from (gpudiag.inprogram.autographmap).
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

from gpudiag.inprogram import autographmap

# A notebook cell's code, as IPython's shell names it (a Jupyter kernel names its cells
# /tmp/ipykernel_<pid>/<hash>.py, a path like a script's: the program's by the rules below)
IPYTHON_CELL = "<ipython-input-"
_LIBRARY_MARKERS = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_HOOKS_DIR = str(Path(__file__).resolve().parent)  # gpudiag/run: the hooks themselves
# Top-level packages that are never the program's, by the origin of the imported module.
LIBRARY_PACKAGES = ("tensorflow", "keras", "tf_keras", "absl", "tensorboard", "numpy",
                    "google", "h5py", "optree", "ml_dtypes", "namex", "rich", "wrapt",
                    "gast", "astunparse", "opt_einsum", "flatbuffers", "termcolor",
                    "tensorflow_estimator", "tensorflow_io_gcs_filesystem", "xprof",
                    "tensorboard_plugin_profile", "gpudiag")


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


def _loaded() -> tuple[bool, ...]:
    """Which library packages are imported: the key of the caches below."""
    return tuple(name in sys.modules for name in LIBRARY_PACKAGES)


@lru_cache(maxsize=64)
def _package_dirs(loaded: tuple[bool, ...]) -> tuple[str, ...]:
    """The directories the library packages imported so far were loaded from."""
    out = []
    for name, imported in zip(LIBRARY_PACKAGES, loaded, strict=True):
        module = sys.modules.get(name) if imported else None
        for path in list(getattr(module, "__path__", None) or [])[:4]:
            if isinstance(path, str):
                out.append(os.path.realpath(path))
    return tuple(out)


@lru_cache(maxsize=256)
def _distributed_tops(directory: str) -> frozenset[str]:
    """The top-level names the distributions installed in ``directory`` own, from their
    metadata (top_level.txt, else the files their RECORD lists)."""
    tops: set[str] = set()
    try:
        metas = [p for p in Path(directory).iterdir()
                 if p.name.endswith((".dist-info", ".egg-info"))]
    except OSError:
        return frozenset()
    for meta in metas:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            listed = meta / "top_level.txt"
            if listed.is_file():
                tops.update(ln.strip() for ln in listed.read_text().splitlines())
                continue
            record = meta / "RECORD"
            if record.is_file():
                tops.update(ln.split("/", 1)[0] for ln in record.read_text().splitlines()
                            if "/" in ln.split(",", 1)[0])
    return frozenset(t for t in tops if t)


@lru_cache(maxsize=1024)
def _installed(directory: str) -> bool:
    """Whether a directory lies in a package installed as a distribution: the metadata
    beside its top-level package directory (``<dist>-<version>.dist-info``) owns it."""
    top = Path(directory)
    while (top.parent / "__init__.py").is_file() and top.parent != top:
        top = top.parent
    if not (top / "__init__.py").is_file():
        return False
    return top.name in _distributed_tops(str(top.parent))


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == root or path.startswith(root + os.sep) for root in roots)


@lru_cache(maxsize=4096)
def _user_path(path: str) -> bool:
    if _under(path, _library_roots()):
        return False
    return not _installed(str(Path(path).parent))


def is_user_file(filename: str) -> bool:
    """True for the program's own source files (and ``python -c`` code)."""
    return _is_user_file(filename, _loaded())


def own_frame(frame: Any, limit: int = sys.maxsize) -> Any:
    """The innermost frame of the program's own code from ``frame`` outwards, within
    ``limit`` frames (None: none there)."""
    for _ in range(limit):
        if frame is None or is_user_file(frame.f_code.co_filename):
            return frame
        frame = frame.f_back
    return None


@lru_cache(maxsize=4096)
def _is_user_file(filename: str, loaded: tuple[bool, ...]) -> bool:
    if filename in ("<string>", "<stdin>") or filename.startswith(IPYTHON_CELL):
        return True
    if not filename or filename.startswith("<") or autographmap.is_generated(filename):
        return False
    if any(m in filename for m in _LIBRARY_MARKERS):
        return False
    path = os.path.realpath(filename)
    return _user_path(path) and not _under(path, _package_dirs(loaded))


def frames(tb: TracebackType | None, limit: int = 40) -> list[dict[str, Any]]:
    """The traceback's frames as plain dicts, innermost last, each marked user or not. A
    frame of autograph's generated code is given the program's file, line and function it
    was converted from (``autograph``: the generated file and line)."""
    out = []
    walked = list(traceback.walk_tb(tb))[-limit:]
    summaries = traceback.StackSummary.extract(iter(walked), limit=None)
    maps: dict[str, Any] = {}
    for (frame, lineno), fs in zip(walked, summaries, strict=True):
        row: dict[str, Any] = {"file": fs.filename, "line": fs.lineno, "function": fs.name,
               "code": (fs.line or "").strip()}
        if autographmap.is_generated(fs.filename):
            mapped = None
            with contextlib.suppress(Exception):
                mapped = autographmap.origin(frame, lineno, maps)
            if mapped is not None:
                row = {**mapped, "autograph": f"{_short(fs.filename)}:{fs.lineno}"}
        row["user"] = is_user_file(str(row["file"]))
        out.append(row)
    return out


def _short(path: str) -> str:
    return path.rsplit(os.sep, 1)[-1]


def user_frame(frame_list: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The innermost frame in the program's own code."""
    for fs in reversed(frame_list):
        if fs["user"]:
            return fs
    return None
