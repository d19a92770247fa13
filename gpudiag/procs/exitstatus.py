"""A child process's exit status in words, the same for probe children and `monitor`'s command."""

from __future__ import annotations

import signal


def describe_exit(returncode: int | None) -> str:
    """``-9`` -> ``was killed by SIGKILL``; ``7`` -> ``exited with code 7``; None (still
    running, or never waited for) -> ``did not finish``. Negative codes are signals, as
    subprocess reports them."""
    if returncode is None:
        return "did not finish"
    if returncode < 0:
        try:
            return f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"was killed by signal {-returncode}"
    return f"exited with code {returncode}"
