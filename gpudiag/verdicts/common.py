"""What every command's verdicts share: a probe child that failed, byte counts as text."""

from __future__ import annotations

from gpudiag.procs.runner import ChildResult
from gpudiag.report import Finding

MIB = 2**20
GIB = 2**30


def child_failed(check_id: str, what: str, child: ChildResult) -> Finding:
    """A probe's child process crashed, hung or raised: a fail with its stderr tail."""
    return Finding(
        check_id, "fail",
        f"{what} did not complete: {child.error}",
        child.evidence(),
        advice=f"Read the child's whole output in {child.stderr_path}; rerun with a longer "
               "--timeout if it was only slow.",
    )


def mib_text(n: int | None) -> str:
    """``67108864`` -> ``64 MiB``; unknown (None) -> ``?``."""
    return "?" if n is None else f"{n / MIB:.0f} MiB"


def gib_text(n: int | None) -> str:
    """``32212254720`` -> ``30.0 GiB``; unknown (None) -> ``?``."""
    return "?" if n is None else f"{n / GIB:.1f} GiB"
