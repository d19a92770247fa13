"""`gpudiag explain` never hangs on, or spends gigabytes for, one file (issue 36, items 3-4).

Real files through the real CLI: a FIFO named ``*.xplane.pb`` (it hung explain with no
output: now stat'ed, refused, never opened), a sparse trace above the stated largest
(refused by its size, the option that lifts the cap named; with the cap lifted it is read
and found corrupt), and a trace that is a symlink out of the directory explained. Each
is one line and exit 2 within seconds, and no run directory is made.
docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from helpers import assert_usage_error, gpudiag

from gpudiag.rundir.confine import MAX_TRACE_BYTES, MAX_TRACE_MB

TRACE_DIR = Path("plugins") / "profile" / "2026_11_27_10_00_00"


@pytest.mark.slow
def test_a_fifo_named_as_a_trace_is_one_line_never_opened(tmp_path: Path) -> None:
    traces = tmp_path / "logdir" / TRACE_DIR
    traces.mkdir(parents=True)
    os.mkfifo(traces / "host.xplane.pb")
    out = tmp_path / "out"
    start = time.monotonic()
    proc = gpudiag("explain", str(tmp_path / "logdir"), "--logdir", str(out), timeout=60)
    assert_usage_error(proc, "is a FIFO, not a regular file", out)
    assert time.monotonic() - start < 30


@pytest.mark.slow
def test_a_trace_above_the_largest_is_refused_by_its_size_and_the_option_lifts_it(
        tmp_path: Path) -> None:
    trace = tmp_path / "logdir" / TRACE_DIR / "host.xplane.pb"
    trace.parent.mkdir(parents=True)
    with trace.open("wb") as f:
        f.truncate(MAX_TRACE_BYTES + 1)  # sparse: no disk
    out = tmp_path / "out"
    proc = gpudiag("explain", str(trace), "--logdir", str(out), timeout=60)
    assert_usage_error(proc, f"above the {MAX_TRACE_BYTES:,} bytes", out)
    assert "--max-trace-mb lifts it" in proc.stderr
    # lifted: it is read (its first bytes: zeros are no protobuf field), still one line
    lifted = gpudiag("explain", str(trace), "--max-trace-mb", str(MAX_TRACE_MB + 1),
                     "--logdir", str(out), timeout=60)
    assert_usage_error(lifted, "is not a readable profiler trace", out)


@pytest.mark.slow
def test_a_trace_linked_from_outside_the_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.xplane.pb"
    outside.write_bytes(b"\x0a\x00")
    traces = tmp_path / "logdir" / TRACE_DIR
    traces.mkdir(parents=True)
    (traces / "host.xplane.pb").symlink_to(outside)
    out = tmp_path / "out"
    assert_usage_error(gpudiag("explain", str(tmp_path / "logdir"), "--logdir", str(out),
                               timeout=60), "resolves outside", out)
