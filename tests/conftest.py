"""Fixtures of every tier (tests/unit, tests/cli, tests/e2e, tests/browser); the helpers
they share are in tests/helpers.py, the golden runs in tests/golden.py."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, assert_title

pytest_plugins = ["golden"]

_GPUDIAG = str(REPO / "gpudiag")
_READERS = (str(REPO / "gpudiag" / "report.py"),)  # findings read back, not made


@pytest.fixture(autouse=True)
def every_finding_gpudiag_makes_is_titled(monkeypatch: pytest.MonkeyPatch) -> None:
    """In every test: each Finding that gpudiag's own code builds (a verdict, a command;
    not a test's hand-made one, not one read back from a report) has a title
    (assert_title)."""
    from gpudiag.report import Finding

    original = Finding.__post_init__

    def checked(self: Finding) -> None:
        original(self)
        caller = sys._getframe(2).f_code.co_filename  # Finding's __init__ -> its caller
        if caller.startswith(_GPUDIAG) and caller not in _READERS:
            assert_title(self.id, self.title)

    monkeypatch.setattr(Finding, "__post_init__", checked)


@pytest.fixture
def logdir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


# ------------------------------------------------------------------ timings kept

LONG_S = 60.0
_spent_s: dict[str, float] = {}
_long_unmarked: dict[str, float] = {}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """A test over LONG_S (setup, call and teardown together, as --durations counts them)
    says why with ``@pytest.mark.long("why")``; one that does not is named at the end of
    the run. A time is no assertion (load moves it), so this only tells."""
    spent = _spent_s[report.nodeid] = _spent_s.get(report.nodeid, 0.0) + report.duration
    if report.when == "teardown" and spent > LONG_S and "long" not in report.keywords:
        _long_unmarked[report.nodeid] = spent


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _long_unmarked:
        terminalreporter.section(f"tests over {LONG_S:.0f} s without @pytest.mark.long")
        for nodeid, spent in sorted(_long_unmarked.items(), key=lambda kv: -kv[1]):
            terminalreporter.write_line(f"{spent:7.1f} s  {nodeid}")
