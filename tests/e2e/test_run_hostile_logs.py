"""TensorFlow's C++ log level and the program's own log under `gpudiag run` as plainly
(issue 26, cases 3 and 13's INFO lines): absl-py's Python log (the glog layout, a .py
file) always reaches the terminal; TensorFlow's C++ lines follow the level of the user's
environment, or the one the program set itself before importing TensorFlow; the program,
its children and a file it pointed fd 2 at see the user's TF_CPP_MIN_LOG_LEVEL, never
gpudiag's. Each program runs plainly and under `gpudiag run` with TF_CPP_MIN_LOG_LEVEL
in the environment; exit code, stdout, its files and its stderr lines are compared (the
C++ lines without their time and thread). docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO

from gpudiag import layout

#: An absl.app program: absl INFO and WARNING lines, TensorFlow imported, an op run, the
#: level it sees, and the level a Python child of its own sees (the child's C++ lines follow
#: that variable: TensorFlow's own behaviour, so the child imports no TensorFlow).
ABSL_APP = """
import os, subprocess, sys
from absl import app, logging

CHILD = "import os; print(os.environ.get('TF_CPP_MIN_LOG_LEVEL', '-'))"

def main(argv):
    if argv[1:] and argv[1] != '-':
        os.environ['TF_CPP_MIN_LOG_LEVEL'] = argv[1]
    logging.info('absl info before tensorflow')
    logging.warning('absl warning before tensorflow')
    import tensorflow as tf
    print('level seen', os.environ.get('TF_CPP_MIN_LOG_LEVEL'), flush=True)
    logging.info('absl info after tensorflow')
    print('sum', int(tf.reduce_sum(tf.constant([1, 2, 3]))), flush=True)
    child = subprocess.run([sys.executable, '-c', CHILD], capture_output=True)
    print('child', child.returncode, 'level seen', child.stdout.decode().strip(), flush=True)

if __name__ == '__main__':
    app.run(main)
"""

_GLOG_PREFIX = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d+\.\d+\s+\d+ ")


def _log_lines(stderr: bytes) -> list[str]:
    """The log lines of the program's stderr (C++ and absl-py's, the glog layout), without
    their time and thread (gpudiag's own lines never have that layout)."""
    return [_GLOG_PREFIX.sub(r"\1 ", line)
            for line in stderr.decode("utf-8", "replace").splitlines()
            if _GLOG_PREFIX.match(line)]


def _both(tmp_path: Path, level: str, *args: str
          ) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": level}
    script = tmp_path / "absl_app.py"
    script.write_text(ABSL_APP)
    plain = subprocess.run([sys.executable, str(script), *args], capture_output=True,
                           env=env, cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL)
    under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(tmp_path / "runs"), "--", sys.executable, str(script), *args],
                           capture_output=True, env=env, cwd=tmp_path, timeout=300,
                           stdin=subprocess.DEVNULL)
    return plain, under


@pytest.mark.slow
@pytest.mark.parametrize(("level", "own"), [("2", "-"), ("1", "-"), ("2", "1"), ("3", "0")],
                         ids=["env-2", "env-1", "env-2-program-sets-1", "env-3-program-sets-0"])
def test_absl_lines_pass_and_cpp_lines_follow_the_programs_level(
        tmp_path: Path, level: str, own: str) -> None:
    plain, under = _both(tmp_path, level, own)
    assert plain.returncode == 0, plain.stderr[-3000:]
    assert under.returncode == plain.returncode, under.stderr[-3000:]
    assert under.stdout == plain.stdout  # the level it and its child see: the user's
    seen = (level if own == "-" else own).encode()
    assert b"level seen " + seen in under.stdout
    assert b"child 0 level seen " + seen in under.stdout
    shown = _log_lines(under.stderr)
    assert "I absl_app.py" not in "".join(shown) or any(
        "absl info before tensorflow" in ln for ln in shown)
    assert sorted(shown) == sorted(_log_lines(plain.stderr)), (shown, plain.stderr[-3000:])
    assert any("absl warning before tensorflow" in ln for ln in shown)
    # the whole C++ log is still saved
    saved = next((tmp_path / "runs").glob(f"*/{layout.CHILDREN_DIR}/{layout.RUN_CHILD_NAME}/"
                                          f"{layout.RUN_STDERR}")).read_bytes()
    assert b"placer.cc" in saved or b"cpu_feature_guard.cc" in saved


DUP2_LOG = """
import os, sys
log = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(log, 2)
import tensorflow as tf
tf.debugging.set_log_device_placement(True)
print('sum', int(tf.reduce_sum(tf.constant([1, 2, 3]))), flush=True)
"""


@pytest.mark.slow
def test_a_file_the_program_made_its_stderr_gets_the_lines_it_gets_plainly(
        tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}
    logs = {}
    for name, prefix in (("plain", []), ("under", [
            sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
            str(tmp_path / "runs"), "--"])):
        log = tmp_path / f"{name}.log"
        done = subprocess.run([*prefix, sys.executable, "-c", DUP2_LOG, str(log)],
                              capture_output=True, env=env, cwd=tmp_path, timeout=300,
                              stdin=subprocess.DEVNULL)
        assert done.returncode == 0 and b"sum 6" in done.stdout, done.stderr[-2000:]
        logs[name] = _log_lines(log.read_bytes())
        if name == "under":  # no line of gpudiag's (its markers) lands in the program's file
            assert layout.RUN_MARKER.encode() not in log.read_bytes()
    assert logs["under"] == logs["plain"]
    assert not any("placer.cc" in ln for ln in logs["under"])  # level 2: no INFO placement
