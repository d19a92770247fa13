"""`gpudiag explain`'s bad input (issue 26, case 16): a path that cannot be looked up (a
parent that cannot be searched, a name over 255 bytes), a trace directory that cannot be
read, an empty or corrupt trace: one line, exit 2, nothing written. A readable trace with
no complete step keeps its finding (exit 0). Permissions are checked from a forked child
that has become ``nobody`` (root, which runs these tests here, may read anything)."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import TESTS_DIR, assert_usage_error, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag.commands import explain
from gpudiag.errors import UsageError

TRACE = next((TESTS_DIR / "data" / "gpu_traces" / "rtx5000_copy_heavy").rglob("*.xplane.pb"))
NOBODY = 65534


def _explain(tmp_path: Path, path: Path) -> object:
    return gpudiag("explain", "--logdir", str(tmp_path / "runs"), str(path), timeout=180)


def test_a_name_over_255_bytes_is_one_line(tmp_path: Path) -> None:
    proc = _explain(tmp_path, tmp_path / ("x" * 300 + ".xplane.pb"))
    assert_usage_error(proc, "File name too long", tmp_path / "runs")  # type: ignore[arg-type]


def test_an_empty_trace_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "host.xplane.pb").touch()
    for path in (tmp_path / "host.xplane.pb", tmp_path):  # the file, or the logdir holding it
        proc = _explain(tmp_path, path)
        assert_usage_error(proc, "is empty (0 bytes)", tmp_path / "runs")  # type: ignore[arg-type]


@pytest.mark.parametrize("content", [b"this is not a trace\n" * 100, TRACE.read_bytes()[:5000],
                                     b"\x0a\x08" + b"\xff" * 8],
                         ids=["not-protobuf", "cut-short", "a-plane-that-is-not-one"])
def test_a_corrupt_trace_is_one_line(tmp_path: Path, content: bytes) -> None:
    bad = tmp_path / "logdir" / "plugins" / "profile" / "run" / "host.xplane.pb"
    bad.parent.mkdir(parents=True)
    bad.write_bytes(content)
    proc = _explain(tmp_path, tmp_path / "logdir")
    assert_usage_error(proc, "is not a readable profiler trace", tmp_path / "runs")  # type: ignore[arg-type]


def test_a_readable_trace_with_no_complete_step_keeps_its_finding(tmp_path: Path) -> None:
    plane = b"\x12\x09/host:CPU"  # XSpace { planes { name: "/host:CPU" } }: no event at all
    (tmp_path / "host.xplane.pb").write_bytes(b"\x0a" + bytes([len(plane)]) + plane)
    proc = _explain(tmp_path, tmp_path / "host.xplane.pb")
    assert proc.returncode == 0, proc.stderr  # type: ignore[attr-defined]
    (run_dir,) = run_dirs(tmp_path / "runs")
    found = findings_by_id(load_report(run_dir))["explain.bottleneck"]
    assert found["status"] == "skip" and "no complete step" in found["message"]


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory ``nobody`` can reach (pytest's own is root's alone)."""
    where = Path(tempfile.mkdtemp(prefix="gpudiag-explain-"))
    where.chmod(0o755)
    try:
        yield where
    finally:
        for top, dirs, _ in os.walk(where):
            for d in dirs:
                (Path(top) / d).chmod(0o755)
        import shutil

        shutil.rmtree(where)


def _as_nobody(path: Path) -> str:
    """explain's input check on ``path`` in a forked child that became ``nobody``: its
    UsageError's message ('' if none, 'crash: ...' for anything else)."""
    if os.geteuid() != 0:
        pytest.skip("the check needs root to become nobody")
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            explain.find_traces(path)
            text = ""
        except UsageError as exc:
            text = str(exc)
        except BaseException as exc:
            text = f"crash: {type(exc).__name__}: {exc}"
        os.write(write, text.encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        text = f.read().decode()
    os.waitpid(pid, 0)
    return text


def test_a_parent_that_cannot_be_searched_is_one_line(shared_dir: Path) -> None:
    trace = shared_dir / "locked" / "logdir" / "host.xplane.pb"
    trace.parent.mkdir(parents=True)
    trace.write_bytes(TRACE.read_bytes())
    (shared_dir / "locked").chmod(0)
    for path in (trace, trace.parent):
        said = _as_nobody(path)
        assert said.startswith("cannot look up ") and "Permission denied" in said, said


def test_a_trace_directory_that_cannot_be_read_says_why(shared_dir: Path) -> None:
    profile = shared_dir / "logdir" / "plugins" / "profile" / "run"
    profile.mkdir(parents=True)
    (profile / "host.xplane.pb").write_bytes(TRACE.read_bytes())
    for d in (shared_dir / "logdir", shared_dir / "logdir" / "plugins"):
        d.chmod(0o755)
    profile.parent.chmod(stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)  # searchable, not listable
    said = _as_nobody(shared_dir / "logdir")
    assert said.startswith("cannot read ") and "Permission denied" in said, said
    assert "no profiler trace" not in said
