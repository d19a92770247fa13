"""A run's id on the GPUDIAG dashboard, and back: its directory relative to the logdir,
each byte of it that is not UTF-8 as ``\\xNN`` (gpudiag.files.readable), so that the page
can hold it and put it in a URL. views.py names the runs it lists, compare.py the runs a
diff compared, plugin.py maps the id a route is given back to a directory."""

from __future__ import annotations

import re
from pathlib import Path

from gpudiag.files import readable
from gpudiag.rundir import Run


def path_id(path: Path, logdir: Path) -> str:
    """A directory's name on the page: relative to the logdir, each byte of it that is not
    UTF-8 as ``\\xNN``; :func:`id_path` maps it back."""
    try:
        name = path.resolve().relative_to(logdir.resolve()).as_posix()
    except ValueError:
        name = path.name
    return readable(name)


def run_id(run: Run, logdir: Path) -> str:
    """The run's name on the page: its directory relative to the logdir."""
    return path_id(run.path, logdir)


_ESCAPED = re.compile(r"\\x([89a-f][0-9a-f])")


def id_path(run_id: str, logdir: Path) -> Path:
    """The directory a run id names (:func:`path_id` backwards): the id as it is when such
    a directory exists, else with each ``\\xNN`` the byte it stands for."""
    literal = logdir / run_id
    if "\\x" not in run_id or literal.exists():
        return literal
    return logdir / _ESCAPED.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)), run_id)
