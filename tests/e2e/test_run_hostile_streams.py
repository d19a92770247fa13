"""The program's streams and descriptors under `gpudiag run` as plainly (issue 26, cases 5,
6, 13): a sys.stderr without flush() or closed, with TensorFlow's placement log asked for;
standard streams closed by gpudiag's caller; fd 2 closed and a file of the program's own
opened in its place (fd 2 pointed at a file with ``os.dup2``: test_run_hostile_logs.py,
whose run also asserts that no line of gpudiag's lands in that file). Each program runs
plainly and under `gpudiag run`; exit code, stdout and the files it writes are compared.
docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from gpudiag import layout

ENV = {**os.environ, "PYTHONPATH": str(REPO)}

STREAM_TO_LOGGER = """
import logging, sys
class StreamToLogger:  # the common recipe: write() only
    def __init__(self, logger):
        self.logger = logger
    def write(self, buf):
        for line in buf.rstrip().splitlines():
            self.logger.info(line.rstrip())
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format='%(message)s')
sys.stderr = StreamToLogger(logging.getLogger('stderr'))
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
print('sum', int(tf.reduce_sum(tf.constant([1, 2, 3]))), flush=True)
"""
CLOSED_STDERR = """
import sys
import tensorflow as tf
sys.stderr.close()
tf.debugging.set_log_device_placement(True)
print('sum', int(tf.reduce_sum(tf.constant([1, 2, 3]))), flush=True)
"""


def _both(tmp_path: Path, program: str) -> tuple[subprocess.CompletedProcess[bytes], ...]:
    plain = subprocess.run([sys.executable, "-c", program], capture_output=True, env=ENV,
                           cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL)
    under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--logdir",
                            str(tmp_path / "runs"), "--", sys.executable, "-c", program],
                           capture_output=True, env=ENV, cwd=tmp_path, timeout=300,
                           stdin=subprocess.DEVNULL)
    return plain, under


def _placement_free(stdout: bytes) -> list[bytes]:
    """stdout without TensorFlow's placement lines (their order among the program's own is
    the C++ log's, not the program's)."""
    return [ln for ln in stdout.splitlines() if b"/job:" not in ln and b"device" not in ln]


@pytest.mark.slow
@pytest.mark.parametrize("program", [STREAM_TO_LOGGER, CLOSED_STDERR],
                         ids=["stderr-without-flush", "closed-stderr"])
def test_the_programs_own_stderr_object_never_breaks_it(tmp_path: Path, program: str) -> None:
    plain, under = _both(tmp_path, program)
    # plainly 0, or 120 where Python's own exit fails to flush the flush-less sys.stderr
    assert b"sum 6" in plain.stdout, plain.stderr[-2000:]
    assert under.returncode == plain.returncode, under.stderr[-3000:]
    assert _placement_free(under.stdout) == _placement_free(plain.stdout)
    assert b"AttributeError" not in under.stderr and b"ValueError" not in under.stderr


FDS = """
import os, pathlib, sys
where = pathlib.Path(sys.argv[1])
states = []
for fd in (0, 1, 2):
    try:
        os.fstat(fd)
        states.append('open')
    except OSError:
        states.append('closed')
(where / 'fds').write_text(' '.join(states))
print('ran')
"""


@pytest.mark.slow
@pytest.mark.parametrize("closing", [">&-", "2>&-", "<&-"])
def test_a_stream_closed_by_the_caller_is_closed_for_the_program_as_plainly(
        tmp_path: Path, closing: str) -> None:
    """`gpudiag run ... >&-` once ended in a traceback before the program ran, `2>&-` in a
    silent exit 1, `<&-` gave the program the events file as its fd 0."""
    seen = []
    for name, prefix in (("plain", []), ("under", [sys.executable, "-m", "gpudiag", "run",
                                                   "--logdir", str(tmp_path / "runs"), "--"])):
        where = tmp_path / name
        where.mkdir()
        argv = [*prefix, sys.executable, "-c", FDS, str(where)]
        done = subprocess.run(["sh", "-c", f"exec {shlex.join(argv)} {closing}"],
                              capture_output=True, env=ENV, cwd=REPO, timeout=120,
                              stdin=subprocess.DEVNULL)
        seen.append((done.returncode, (where / "fds").read_text() if
                     (where / "fds").exists() else "never ran"))
        if name == "under":
            assert b"Traceback" not in done.stderr, done.stderr[-2000:]
    assert seen[1] == seen[0], seen


#: fd 2 closed, a data file opened in its place (fd 2 again), then the program's own
#: placement log: TensorFlow prints its eager placement lines on stdout (issue 36, case 7).
CLOSED_FD2_THEN_FILE = """
import os
os.close(2)
fd = os.open('data.txt', os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
print('data file fd', fd, flush=True)
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
print('sum', int(tf.reduce_sum(tf.constant([1, 2, 3]))), flush=True)
"""

_LOG_PREFIX = re.compile(rb"^[IWEF]\d{4} [\d:.]+\s+\d+ ")


@pytest.mark.slow
def test_a_file_opened_as_fd_2_and_the_programs_placement_log_as_plainly(
        tmp_path: Path) -> None:
    """stdout as plainly, placement lines included (they were hidden: gpudiag's marker
    that the program asked for them could not go to fd 2); the data file holds what it
    holds plainly (TensorFlow's log lines, their time and pid aside), nothing of gpudiag's."""
    seen = []
    for name in ("plain", "under"):
        where = tmp_path / name
        where.mkdir()
        argv = [sys.executable, "-c", CLOSED_FD2_THEN_FILE]
        if name == "under":
            argv = [sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                    str(tmp_path / "runs"), "--", *argv]
        done = subprocess.run(argv, capture_output=True, env=ENV, cwd=where, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0, done.stderr[-2000:]
        data = (where / "data.txt").read_bytes()
        assert layout.RUN_MARKER.encode() not in data
        seen.append((done.stdout, [_LOG_PREFIX.sub(b"", ln) for ln in data.splitlines()]))
    assert b"/job:localhost" in seen[0][0]  # plainly: placement lines on stdout
    assert sorted(seen[1][0].splitlines()) == sorted(seen[0][0].splitlines())
    assert seen[1][1] == seen[0][1]
