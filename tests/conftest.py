"""Fixtures and checks of every tier (tests/README.md); the helpers the tiers share are in
tests/helpers.py, the golden runs in tests/golden.py.

The tiers are held to what they may do: a unit test starts no process, and no unit or cli
test imports TensorFlow, at collection (a module-level import) or while it runs. The check
sees an import TensorFlow's first: `make check` (unit and cli alone) always does."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
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


# ------------------------------------------------------------------ the tiers held

TESTS = Path(__file__).parent
NO_PROCESS = TESTS / "unit"
NO_TENSORFLOW = (TESTS / "unit", TESTS / "cli")
_tf_at_collect: dict[str, bool] = {}


def _tf() -> bool:
    return "tensorflow" in sys.modules


def _under(path: Path, tiers: tuple[Path, ...]) -> bool:
    return any(path.is_relative_to(t) for t in tiers)


def pytest_collectstart(collector: pytest.Collector) -> None:
    _tf_at_collect[collector.nodeid] = _tf()


#: Modules of a TensorFlow-free tier that imported TensorFlow when collected: each of their
#: tests fails (a collect report marked failed afterwards would not stop them running).
_imported_tf: set[str] = set()


def pytest_collectreport(report: pytest.CollectReport) -> None:
    path = TESTS.parent / str(report.fspath)  # relative to the rootdir, as pytest gives it
    if (report.passed and not _tf_at_collect.pop(report.nodeid, True) and _tf()
            and path.suffix == ".py" and _under(path, NO_TENSORFLOW)):
        _imported_tf.add(report.nodeid)


def _refused(self: Any, args: Any, *_: Any, **__: Any) -> None:
    raise AssertionError(f"a unit test starts no process (it started {args!r}), nor does "
                         "any fixture it uses: it belongs in tests/cli or tests/e2e")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """A unit test's whole protocol (its module's fixtures made in its setup included)
    starts no process."""
    unit = _under(Path(str(item.path)), (NO_PROCESS,))
    original = subprocess.Popen.__init__
    if unit:
        subprocess.Popen.__init__ = _refused  # type: ignore[method-assign]
    try:
        return (yield)
    finally:
        if unit:
            subprocess.Popen.__init__ = original  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def no_tensorflow_in_its_tier(request: pytest.FixtureRequest) -> Iterator[None]:
    module = request.node.nodeid.split("::")[0]
    assert module not in _imported_tf, (f"{module} imports TensorFlow: its tier takes none "
                                        "(tests/README.md); it belongs in tests/e2e")
    had_tf = _tf()
    yield
    assert had_tf or not _tf() or not _under(request.path, NO_TENSORFLOW), \
        "this test imported TensorFlow: its tier takes none (tests/README.md)"


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
