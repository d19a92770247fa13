"""Paths confined to one logdir: what a reader that serves a logdir to someone else reads
(`gpudiag mcp`; the dashboard's routes can share it), checked before anything is read.

The rules, one function each:

- ``inside(logdir, name)``: ``name`` (relative to the logdir, or absolute) resolved, with
  symlinks followed and ``..`` folded, must land inside the logdir's own resolved path, and
  must then exist and be a directory or a regular file (a FIFO, a device or a socket would
  block a reader or never end). Whether a path outside the logdir exists is never told: it
  is "outside the logdir" either way.
- ``check_tree(logdir, top)``: every entry under the directory ``top`` obeys the same: a
  symlink anywhere in it that leads out of the logdir (or nowhere), or a special file,
  refuses the whole tree, since a reader of a run directory reads files by their names
  under it (report.json, children's JSON, TensorBoard event files, traces).

Every refusal is a RunDirError (exit 2, one line) naming the path as the caller gave it,
relative to the logdir, never the target outside.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from gpudiag.rundir.errors import RunDirError


def _shown(name: str | os.PathLike[str]) -> str:
    text = os.fspath(name)
    return text if len(text) <= 200 else f"{text[:120]}...{text[-60:]}"


def _resolved(path: Path, shown: str) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError, ValueError) as exc:  # a loop, a name too long, a NUL
        reason = getattr(exc, "strerror", None) or str(exc).splitlines()[0][:80]
        raise RunDirError(f"{shown}: cannot be looked up ({reason})") from None


def inside(logdir: Path, name: str | os.PathLike[str]) -> Path:
    """``name``'s resolved path, checked to stay inside ``logdir`` and to be a directory or
    a regular file (module docstring); RunDirError otherwise."""
    shown = _shown(name)
    root = _resolved(Path(logdir), _shown(logdir))
    raw = Path(name)
    path = _resolved(raw if raw.is_absolute() else root / raw, shown)
    if not path.is_relative_to(root):
        raise RunDirError(f"{shown} is outside the logdir")
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise RunDirError(f"{shown}: no such file or directory in the logdir") from None
    except OSError as exc:
        raise RunDirError(f"{shown}: cannot be looked up ({exc.strerror})") from None
    if not (stat.S_ISDIR(mode) or stat.S_ISREG(mode)):
        raise RunDirError(f"{shown} is not a regular file or a directory")
    return path


def check_tree(logdir: Path, top: Path) -> None:
    """RunDirError unless everything under the directory ``top`` (itself inside ``logdir``:
    ``inside``) stays inside the logdir and is a directory or a regular file. Symlinked
    directories inside the logdir are checked too, each directory once."""
    root = _resolved(Path(logdir), _shown(logdir))
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        where = stack.pop()
        try:
            entries = list(os.scandir(where))
        except OSError as exc:
            raise RunDirError(f"cannot read {_name(where, root)}: {exc.strerror}") from None
        for entry in entries:
            path = Path(entry.path)
            if entry.is_symlink() and not _resolved(path, _name(path, root)).is_relative_to(
                    root):
                raise RunDirError(f"{_name(path, root)} is a symlink out of the logdir")
            try:
                st = path.stat()
            except OSError:
                raise RunDirError(f"{_name(path, root)} is a symlink to nothing") from None
            if stat.S_ISDIR(st.st_mode):
                if (st.st_dev, st.st_ino) not in seen:
                    seen.add((st.st_dev, st.st_ino))
                    stack.append(path)
            elif not stat.S_ISREG(st.st_mode):
                raise RunDirError(f"{_name(path, root)} is not a regular file or a directory")


def _name(path: Path, root: Path) -> str:
    """``path`` relative to the logdir where it is under it (as given, not resolved)."""
    return _shown(path.relative_to(root) if path.is_relative_to(root) else path)
