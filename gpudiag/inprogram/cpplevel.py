"""TensorFlow's C++ log level: gpudiag's for TensorFlow's import, the program's otherwise.

TensorFlow fixes the level of its C++ log (TF_CPP_MIN_LOG_LEVEL) once, while
``import tensorflow`` runs. gpudiag needs the whole log (the placement log, CUDA and NCCL
messages) on the stream it reads; the program must see its own value (the user's
environment's, or what it set itself before the import), and so must every process it
starts. So, only while TensorFlow's import runs, and only when fd 2 is gpudiag's stream
(a program that pointed fd 2 at a file of its own gets its own level there, and no extra
line), TF_CPP_MIN_LOG_LEVEL is 0; the program's value is put back as the import returns.
The value the program had is told to gpudiag on a marker line (RUN_MARK_CPP_LEVEL): the
terminal filter (gpudiag.run.streams) shows TensorFlow's C++ lines from that level up,
as TensorFlow would have.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from gpudiag.layout import RUN_MARK_CPP_LEVEL

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

VAR = "TF_CPP_MIN_LOG_LEVEL"


def before_tensorflow(agent: Agent) -> Callable[[], None] | None:
    """As the program's ``import tensorflow`` starts: lend it level 0; returns the call that
    gives the program its own value back (None: nothing lent)."""
    own = os.environ.get(VAR)
    agent.program_cpp_level = own
    agent.marker(f"{RUN_MARK_CPP_LEVEL} {own or ''}".rstrip())
    if not agent.stderr_is_gpudiags():
        return None  # its own file: TensorFlow writes there what it would plainly
    agent.cpp_log_captured = True
    if own == "0":
        return None
    os.environ[VAR] = "0"

    def give_back() -> None:
        if os.environ.get(VAR) != "0":
            return  # changed during the import: the program's (or TensorFlow's) own
        if own is None:
            del os.environ[VAR]
        else:
            os.environ[VAR] = own
    return give_back
