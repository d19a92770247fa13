"""What every command's verdicts share: a probe child that failed, byte counts as text,
a finding's title that fits, a name as a finding id's last word."""

from __future__ import annotations

from gpudiag.layout.families import TITLE_MAX
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
        title=title(f"{what} did not complete", "a probe's child process did not complete"),
        advice=f"Read the child's whole output in {child.stderr_path}; rerun with a longer "
               "--timeout if it was only slow.",
    )


def mib_text(n: int | None) -> str:
    """``67108864`` -> ``64 MiB``; unknown (None) -> ``?``."""
    return "?" if n is None else f"{n / MIB:.0f} MiB"


def gib_text(n: int | None) -> str:
    """``32212254720`` -> ``30.0 GiB``; unknown (None) -> ``?``."""
    return "?" if n is None else f"{n / GIB:.1f} GiB"


def title(*options: str) -> str:
    """A finding's title: the first of ``options`` (the fullest first, each a whole
    sentence) that fits TITLE_MAX characters on one line. The last option is written to
    fit whatever the names in the others are (no user-given name in it); when even it does
    not, its first words that fit (never a cut word, never "...")."""
    for option in options:
        text = " ".join(option.split())
        if len(text) <= TITLE_MAX:
            return text
    words = " ".join(options[-1].split()).split(" ")
    out = ""
    for word in words:
        if len(f"{out} {word}".strip()) > TITLE_MAX:
            break
        out = f"{out} {word}".strip()
    return out.rstrip(",;:")


def slug(name: str) -> str:
    """A name as a finding id's last word (``Model.fit`` -> ``model.fit``)."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name.lower()).strip("-")
