"""Findings about how gpudiag rode along with the program (pure: plain data in).

``run.saved-output``: the program's output that gpudiag could not save (a full disk); the
program went on and its output still reached the terminal.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.report import Finding


def saved_output(failures: Sequence[str]) -> Finding | None:
    """One finding for the saved streams that failed (each a one-line message naming the
    file and the errno); None when everything was saved."""
    if not failures:
        return None
    return Finding(
        "run.saved-output", "fail",
        f"gpudiag stopped saving the program's output: {failures[0]}"
        + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""),
        {"failures": list(failures)},
        advice="The program ran on and its output reached the terminal; the saved copy (and "
               "the findings read from it: placement, TensorFlow's log) ends where the disk "
               "filled. Free space or point --logdir at a disk with room, and run again.")
