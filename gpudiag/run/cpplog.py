"""TensorFlow's C++ log lines as they reach a program's output (what the terminal is shown
of them is gpudiag.run.streams' filter): a line's severity and C++ source file (CPP_LINE:
``I0000 00:00:... file.cc:12] ...`` or the older ``2024-01-01 12:00:00.000000: I
file.cc:12] ...``), the placement log's lines, absl's pre-init warning and the library
loads logged before it, a message's second line (CONTINUATIONS), and CppLog: which lines
of a captured output are that log (scripts/demo.py keeps them out of its terminal).
"""

from __future__ import annotations

import re

# The source file of a C++ log line is a C++ one: absl-py (Python) names its .py file.
CPP_SOURCE = r"\.(?:cc|cpp|cxx|c|h|hpp|inc)"
CPP_LINE = re.compile(
    r"^(?:(?P<sev>[IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ (?P<file>[\w.\-]+" + CPP_SOURCE
    + r"):\d+\]|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: (?P<sev2>[IWEF]) (?P<file2>[\w./\-]+"
    + CPP_SOURCE + r"):\d+\])")
SEVERITY = {"I": 0, "W": 1, "E": 2, "F": 3}
PLACEMENT_CPP = re.compile(r"(?:execute\.cc|placer\.cc):\d+\]")
PLACEMENT_STDOUT = re.compile(r"^\S[^\n]*?: \([A-Za-z0-9_]+\): /job:\S+$")
ABSL_PRE_INIT = "WARNING: All log messages before absl::InitializeLog() is called"
PRE_INIT_FILES = frozenset({"port.cc", "cudart_stub.cc"})
# A C++ message that goes on over a second line: (file, how the second line starts).
CONTINUATIONS = {"cpu_feature_guard.cc": "To enable the following instructions"}


class CppLog:
    """Which lines of a captured output are TensorFlow's C++ log (any level), with the
    pre-init warning before its first lines and a message's second line
    (``CONTINUATIONS``): what `make demo` keeps out of its terminal (scripts/demo.py)."""

    def __init__(self) -> None:
        self._continue: str | None = None

    def __call__(self, line: str) -> bool:
        follows, self._continue = self._continue, None
        if follows is not None and line.startswith(follows):
            return True
        if line.startswith(ABSL_PRE_INIT):
            return True
        m = CPP_LINE.match(line)
        if m is None:
            return False
        self._continue = CONTINUATIONS.get(m["file"] or (m["file2"] or "").rsplit("/", 1)[-1])
        return True
