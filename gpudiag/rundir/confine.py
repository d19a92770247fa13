"""Only what is inside a root is read, and only regular files of a bounded size.

Two kinds of reader use it:

- every reader of what a run directory holds (load_run: report.json and the children's
  config.json and result.json; explain's traces; the TensorBoard plugin's routes through
  load_run): ``read_confined`` (the bytes) and ``check_confined`` (the stat of a file
  another reader opens, a trace), so one file never blinds or hangs a reader:

  - the path is resolved (symlinks followed) and must stay inside ``root``: a symlink out
    of it is refused, and so is a symlink loop;
  - a stat comes before any open: a FIFO, a device, a socket or a directory is refused
    with one line and never opened (a FIFO's open would block for ever);
  - a file above ``max_bytes`` is refused by its size before it is read (a sparse 2 GB
    report.json costs nothing); the open itself is non-blocking and the file is stat'ed
    again through its descriptor, so a file swapped for a FIFO between the two is refused.

- a reader that serves a logdir to someone else (`gpudiag mcp`; the dashboard's routes)
  checks a name before anything is read: ``inside(logdir, name)``: ``name`` (relative to
  the logdir, or absolute) resolved must land inside the logdir and be a directory or a
  regular file; whether a path outside exists is never told (it is "outside the logdir"
  either way); ``check_tree(logdir, top)``: every entry under the directory ``top`` obeys
  the same (a symlink anywhere in it out of the logdir, or a special file, refuses the
  whole tree, since a run directory's files are read by their names under it).

Every refusal is a RunDirError (exit 2; a 400 on the plugin's routes) naming the path and
why.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from gpudiag.rundir.errors import RunDirError

MiB = 1024 * 1024
#: report.json and a child's config.json / result.json: gpudiag writes at most a few MB.
MAX_JSON_BYTES = 32 * MiB
#: The largest profiler trace `explain` reads unless --max-trace-mb says more: reading one
#: costs about 5 times its size in memory (a 300 MB trace took 1.5 GB); gpudiag's own
#: profiled windows are a few MB.
MAX_TRACE_MB = 256
MAX_TRACE_BYTES = MAX_TRACE_MB * MiB

_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a directory"))


def _kind(mode: int) -> str:
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def resolve_inside(path: Path, root: Path) -> Path:
    """``path`` resolved (symlinks followed), or RunDirError when it leaves ``root`` or
    cannot be resolved (a symlink loop, a NUL byte, a name too long)."""
    try:
        real = Path(os.path.realpath(path, strict=False))
        top = Path(os.path.realpath(root, strict=False))
        if path.is_symlink():  # a dangling or looping link: realpath may stop short
            path.stat()
    except (OSError, RuntimeError, ValueError) as exc:
        raise RunDirError(f"{_show(path)}: cannot be resolved ({_why(exc)})") from None
    if real != top and not real.is_relative_to(top):
        raise RunDirError(f"{_show(path)}: resolves outside {_show(root)} (a symlink out of "
                          "it is not read)")
    return real


def check_confined(path: Path, root: Path, *, max_bytes: int) -> os.stat_result:
    """The stat of ``path`` when it is a regular file inside ``root`` of at most
    ``max_bytes``; else RunDirError, one line. Never opens it."""
    real = resolve_inside(path, root)
    try:
        st = real.stat()
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{_show(path)}: cannot be read ({_why(exc)})") from None
    if not stat.S_ISREG(st.st_mode):
        raise RunDirError(f"{_show(path)}: is {_kind(st.st_mode)}, not a regular file "
                          "(not opened)")
    if st.st_size > max_bytes:
        raise RunDirError(f"{_show(path)}: {st.st_size:,} bytes, above the {max_bytes:,} "
                          "bytes gpudiag reads of such a file (not read)")
    return st


def read_confined(path: Path, root: Path, *, max_bytes: int = MAX_JSON_BYTES) -> bytes:
    """The bytes of ``path``, a regular file inside ``root`` of at most ``max_bytes``
    (module docstring); RunDirError, one line, for anything else."""
    st = check_confined(path, root, max_bytes=max_bytes)
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(resolve_inside(path, root), flags)
    except (OSError, ValueError) as exc:
        raise RunDirError(f"{_show(path)}: cannot be read ({_why(exc)})") from None
    try:
        now = os.fstat(fd)
        if not stat.S_ISREG(now.st_mode) or (now.st_dev, now.st_ino) != (st.st_dev, st.st_ino):
            raise RunDirError(f"{_show(path)}: changed while it was opened (now "
                              f"{_kind(now.st_mode)}); not read")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, MiB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise RunDirError(f"{_show(path)}: cannot be read ({_why(exc)})") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:
        raise RunDirError(f"{_show(path)}: grew above the {max_bytes:,} bytes gpudiag reads "
                          "of such a file (not read)")
    return data


def _show(path: Path) -> str:
    from gpudiag.files import readable

    text = readable(str(path)).replace("\0", "\\0")
    return text if len(text) <= 160 else f"{text[:80]}...{text[-60:]}"


def _why(exc: BaseException) -> str:
    if isinstance(exc, OSError) and exc.errno is not None:
        return exc.strerror or errno.errorcode.get(exc.errno, str(exc.errno))
    return str(exc).splitlines()[0][:80] if str(exc) else type(exc).__name__


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


def check_tree(logdir: Path, top: Path, *, what: str = "the logdir") -> None:
    """RunDirError unless everything under the directory ``top`` (itself inside ``logdir``:
    ``inside``) stays inside the logdir and is a directory or a regular file. Symlinked
    directories inside the logdir are checked too, each directory once; an entry that
    vanishes meanwhile (a running command's file renamed into place) is passed over.
    ``what``: the root as the refusal names it (load_run checks a run's own files against
    the run directory)."""
    root = _resolved(Path(logdir), _shown(logdir))
    seen: set[tuple[int, int]] = set()
    stack = [top]
    while stack:
        where = stack.pop()
        try:
            entries = list(os.scandir(where))
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise RunDirError(f"cannot read {_name(where, root)}: {exc.strerror}") from None
        for entry in entries:
            _check_entry(Path(entry.path), entry, root, what, seen, stack)


def _check_entry(path: Path, entry: os.DirEntry[str], root: Path, what: str,
                 seen: set[tuple[int, int]], stack: list[Path]) -> None:
    try:
        link = entry.is_symlink()
    except OSError:
        return
    if link and not _resolved(path, _name(path, root)).is_relative_to(root):
        raise RunDirError(f"{_name(path, root)} is a symlink out of {what}")
    try:
        st = path.stat()
    except FileNotFoundError:
        if link:
            raise RunDirError(f"{_name(path, root)} is a symlink to nothing") from None
        return  # gone since the directory was read
    except OSError as exc:
        raise RunDirError(f"{_name(path, root)}: cannot be looked up ({exc.strerror})") \
            from None
    if stat.S_ISDIR(st.st_mode):
        if (st.st_dev, st.st_ino) not in seen:
            seen.add((st.st_dev, st.st_ino))
            stack.append(path)
    elif not stat.S_ISREG(st.st_mode):
        raise RunDirError(f"{_name(path, root)} is {_kind(st.st_mode)}, not a regular file "
                          "or a directory")


def confined_dir(logdir: Path, name: str | os.PathLike[str]) -> Path:
    """What a reader serving a logdir (`gpudiag mcp`, the GPUDIAG tab) may read of the
    ``name`` it was asked for: ``inside`` the logdir, and when a directory, nothing under
    it leading out (``check_tree``)."""
    path = inside(logdir, name)
    if path.is_dir():
        check_tree(logdir, path)
    return path


#: How deep a walk looks under a logdir or a run (gpudiag's deepest trace is 7 levels
#: below its logdir): a directory deeper is not looked into, and said.
MAX_WALK_DEPTH = 48


@dataclass(frozen=True)
class Walked:
    """What :func:`walk` found: the entries wanted, and each directory it could not or did
    not look into, with why ("Permission denied", "more than 48 directories deep: not
    looked into"): said as "cannot read <directory>: <why>"."""

    found: list[Path]
    skipped: list[tuple[Path, str]]


def walk(top: Path, wanted: Callable[[str], bool], *,
         max_depth: int = MAX_WALK_DEPTH) -> Walked:
    """Every entry under the directory ``top`` that is not a directory and whose name
    ``wanted`` accepts, sorted; symlinked directories are not followed. Iterative: no
    recursion, whatever the depth; a directory ``max_depth`` levels below ``top`` is not
    looked into, one that cannot be read is skipped, both said in ``skipped``; one that
    vanishes meanwhile is passed over."""
    found: list[Path] = []
    skipped: list[tuple[Path, str]] = []
    stack: list[tuple[Path, int]] = [(Path(top), 0)]
    while stack:
        where, depth = stack.pop()
        try:
            with os.scandir(where) as it:
                entries = list(it)
        except FileNotFoundError:
            continue
        except OSError as exc:
            skipped.append((where, _why(exc)))
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir(follow_symlinks=False)
            except OSError:
                continue
            if not is_dir:
                if wanted(entry.name):
                    found.append(Path(entry.path))
            elif depth + 1 >= max_depth:
                skipped.append((Path(entry.path), f"more than {max_depth} directories deep: "
                                                  "not looked into"))
            else:
                stack.append((Path(entry.path), depth + 1))
    return Walked(sorted(found), sorted(skipped))


def _name(path: Path, root: Path) -> str:
    """``path`` relative to the logdir where it is under it (as given, not resolved)."""
    return _shown(path.relative_to(root) if path.is_relative_to(root) else path)
