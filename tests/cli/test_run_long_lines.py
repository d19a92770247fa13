"""Output without newlines under `gpudiag run` (issue 26, case 8): the program's time to
write one long line grows linearly with its length (the filter and the live stderr scan
hold at most streams.MAX_LINE_BYTES of a line), gpudiag's memory does not grow with it,
and the bytes arrive whole. Linear is held under gpudiag against itself, in CPU seconds
beyond its own start (8 and 64 MB: a quadratic filter takes 64 times as long, a linear
one 8), never in the clock's seconds nor against the plain run's time: load moves those
(a `make check` at load 9: 64 MB in 1.61 s against 0.05 s plainly, still linear). What
the program's output costs under run against plainly is benchmarks/output_throughput.py's.
Measured before the fix: 64 MB 2.5 s against 0.06 s plainly, 0.43 s after; 8 MB 0.06 s
before, 0.09 s after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

ENV = {**os.environ, "PYTHONPATH": str(REPO)}
LONG_LINE = """
import pathlib, sys, time
size, stream, where = int(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
out = getattr(sys, stream).buffer
chunk = b'x' * 65536
start = time.perf_counter()
for _ in range(size // len(chunk)):
    out.write(chunk)
    out.flush()
out.write(b'\\n')
out.flush()
where.write_text(str(time.perf_counter() - start))
"""
MB = 1 << 20


def _timed(tmp_path: Path, size: int, stream: str, under: bool) -> tuple[float, bytes]:
    """The program's own time to write the line, and what reached gpudiag's (or the
    program's) stdout."""
    where = tmp_path / f"t-{size}-{stream}-{under}"
    prefix = [sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
              str(tmp_path / "runs"), "--"] if under else []
    proc = subprocess.Popen([*prefix, sys.executable, "-c", LONG_LINE, str(size), stream,
                             str(where)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            stdin=subprocess.DEVNULL, env=ENV, cwd=tmp_path)
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0
    return float(where.read_text()), out


def _used(tmp_path: Path, size: int, stream: str) -> tuple[float, int]:
    """The CPU seconds and the peak resident memory (ru_utime + ru_stime, ru_maxrss) of
    gpudiag and the processes it waited for (the program, whose own are a few MB and its
    writes' CPU), writing one line of ``size`` bytes. CPU time, not the clock: a busy
    machine slows the clock of every run, not the work each does."""
    where = tmp_path / f"m-{size}-{stream}"
    pid = os.fork()
    if pid == 0:  # a child of its own, so that its rusage is this run's alone
        code = subprocess.call([sys.executable, "-m", "gpudiag", "run", "--quiet",
                                "--logdir", str(tmp_path / "runs"), "--", sys.executable,
                                "-c", LONG_LINE, str(size), stream, str(where)],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               stdin=subprocess.DEVNULL, env=ENV, cwd=tmp_path)
        os._exit(code)
    _, status, usage = os.wait4(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss * 1024


@pytest.mark.slow
@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_a_line_without_newlines_takes_linear_time_and_bounded_memory(
        tmp_path: Path, stream: str) -> None:
    _, plain_out = _timed(tmp_path, 64 * MB, stream, under=False)
    _, under_out = _timed(tmp_path, 64 * MB, stream, under=True)
    assert under_out == plain_out
    (base_s, small), (short_s, _), (long_s, big) = (
        _used(tmp_path, size, stream) for size in (64 << 10, 8 * MB, 64 * MB))
    # linear: eight times the bytes, about eight times the CPU beyond gpudiag's own start
    # (quadratic: sixty-four; before the fix, 64 MB took 2.5 s)
    assert long_s - base_s < 16 * max(short_s - base_s, 0.0) + 0.5, (base_s, short_s, long_s)
    assert big - small < 16 * MB, (small, big)  # before: the whole line, and copies of it
