"""``%load_ext gpudiag`` and the ``%%gpudiag`` cell magic (IPython's magics API).

    %%gpudiag --logdir runs
    model.fit(dataset, epochs=3)

runs the cell's code under :func:`gpudiag.notebook.watch.watch` with the kernel's own
``run_cell`` (so its output, its last expression's value and its exception are shown as
IPython shows them plainly), then shows the diagnosis. Options: ``--logdir DIR``,
``--profile-warmup N``, ``--profile-steps N``; a bad one is one line on stderr and the
cell runs unwatched.
"""

from __future__ import annotations

import shlex
import sys
from typing import Any

from gpudiag.notebook.display import cell_numbers
from gpudiag.notebook.watch import DEFAULT_LOGDIR, Watch

USAGE = "usage: %%gpudiag [--logdir DIR] [--profile-warmup N] [--profile-steps N]"
_OPTIONS = {"--logdir": "logdir", "--profile-warmup": "profile_warmup_steps",
            "--profile-steps": "profile_steps"}


def parse(line: str) -> dict[str, Any]:
    """The magic's line as watch()'s arguments; ValueError with a one-line reason."""
    words = shlex.split(line)
    out: dict[str, Any] = {}
    while words:
        word = words.pop(0)
        name, eq, value = word.partition("=")
        if name not in _OPTIONS:
            raise ValueError(f"unknown option {word!r}; {USAGE}")
        if not eq:
            if not words:
                raise ValueError(f"{name} needs a value; {USAGE}")
            value = words.pop(0)
        key = _OPTIONS[name]
        if key == "logdir":
            out[key] = value
            continue
        try:
            number = int(value)
        except ValueError:
            raise ValueError(f"{name} takes a whole number, not {value!r}") from None
        if number < 0:
            raise ValueError(f"{name} takes a number >= 0, not {number}")
        out[key] = number
    return out


def gpudiag_cell(line: str, cell: str) -> None:
    from IPython import get_ipython

    shell = get_ipython()
    try:
        options = parse(line)
    except ValueError as exc:
        print(f"gpudiag: {exc}; the cell ran without gpudiag", file=sys.stderr)
        shell.run_cell(cell, store_history=False)
        return
    known = cell_numbers()
    outer = max(known.values(), default=None)  # this cell's In[N]: the latest
    watch = Watch(options.pop("logdir", DEFAULT_LOGDIR), label="%%gpudiag", **options)
    with watch:
        result = shell.run_cell(cell, store_history=False)
        watch.block_error = result.error_in_exec  # shown by IPython already
        if outer is not None:  # the body runs as a cell of its own: named as this one
            watch.cell_names = {name: outer for name in cell_numbers() if name not in known}


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext gpudiag``: registers ``%%gpudiag``."""
    ipython.register_magic_function(gpudiag_cell, magic_kind="cell", magic_name="gpudiag")
