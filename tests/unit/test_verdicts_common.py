"""Shared verdict helpers: a failed probe child, byte counts as text."""

from __future__ import annotations

from pathlib import Path

from gpudiag.procs.runner import ChildResult
from gpudiag.verdicts.common import child_failed, gib_text, mib_text


def test_child_failed_is_a_fail_pointing_at_the_childs_stderr(tmp_path: Path) -> None:
    child = ChildResult(name="placement", probe="placement", ok=False, result=None,
                        error="the child process was killed by SIGKILL and left no result",
                        error_type="Crash", returncode=-9, timed_out=False, duration_s=1.23456,
                        dir=tmp_path, stderr_tail=["Killed"])
    f = child_failed("placement.probe", "the placement probe", child)
    assert f.id == "placement.probe" and f.status == "fail"
    assert f.message == ("the placement probe did not complete: the child process was killed "
                         "by SIGKILL and left no result")
    assert str(tmp_path / "stderr.txt") in f.advice and "--timeout" in f.advice
    assert f.evidence["returncode"] == -9 and f.evidence["stderr_tail"] == ["Killed"]
    assert f.evidence["duration_s"] == 1.235


def test_byte_counts_as_text() -> None:
    assert mib_text(64 * 2**20) == "64 MiB"
    assert mib_text(None) == "?"
    assert gib_text(30 * 2**30) == "30.0 GiB"
    assert gib_text(None) == "?"
