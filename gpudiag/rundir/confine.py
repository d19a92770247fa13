"""Only regular files inside a root, of a bounded size, are read: ``read_confined`` (the
bytes) and ``check_confined`` (the stat of a file another reader opens, a trace).

Every reader of what a run directory holds (load_run: report.json and the children's
config.json and result.json; explain's traces; the TensorBoard plugin's routes through
load_run) goes through here, so one file never blinds or hangs a reader:

- the path is resolved (symlinks followed) and must stay inside ``root``: a symlink out of
  it is refused, and so is a symlink loop;
- a stat comes before any open: a FIFO, a device, a socket or a directory is refused with
  one line and never opened (a FIFO's open would block for ever);
- a file above ``max_bytes`` is refused by its size before it is read (a sparse 2 GB
  report.json costs nothing); the open itself is non-blocking and the file is stat'ed
  again through its descriptor, so a file swapped for a FIFO between the two is refused.

Every refusal is a RunDirError (exit 2; a 400 on the plugin's routes) naming the path and
why.
"""

from __future__ import annotations

import errno
import os
import stat
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
