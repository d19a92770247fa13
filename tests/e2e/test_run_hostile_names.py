"""Names under `gpudiag run` as plainly (issue 26, case 15): a program's own module named
gpudiag.py and its own sitecustomize.py are the ones it imports, its sys.path is the one
it has plainly, and gpudiag's hooks still observe it. The program runs plainly and under
`gpudiag run`; exit code and stdout are compared. docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, load_report, run_dirs

ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}

OWN_GPUDIAG = "VALUE = 42\n"
OWN_SITECUSTOMIZE = "print('the program\\'s sitecustomize ran', flush=True)\nMARK = 'mine'\n"
TRAIN = """
import sys
import gpudiag
import sitecustomize
print(gpudiag.VALUE, sitecustomize.MARK, sys.path[1:], flush=True)
import tensorflow as tf

@tf.function
def step(x):
    return x * 2

for _ in range(12):
    step(tf.constant(1.0))
import gpudiag as again
print(again.VALUE, sys.modules['sitecustomize'].MARK, flush=True)
"""
NO_SITECUSTOMIZE = """
try:
    import sitecustomize
    print('imported', sitecustomize.__file__)
except ImportError as exc:
    print('ImportError', exc.name)
"""


def _both(program: Path) -> tuple[subprocess.CompletedProcess[bytes], ...]:
    runs = program.parent.parent / "runs"
    plain = subprocess.run([sys.executable, str(program)], capture_output=True, env=ENV,
                           cwd=REPO, timeout=300, stdin=subprocess.DEVNULL)
    # cwd is not the program's directory: `python -m gpudiag` (the test's way to start
    # gpudiag) would import the program's gpudiag.py itself
    under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(runs), "--", sys.executable, str(program)],
                           capture_output=True, env=ENV, cwd=REPO, timeout=300,
                           stdin=subprocess.DEVNULL)
    return plain, under


@pytest.mark.slow
def test_the_programs_own_gpudiag_and_sitecustomize_come_first(tmp_path: Path) -> None:
    where = tmp_path / "job"
    where.mkdir()
    (where / "gpudiag.py").write_text(OWN_GPUDIAG)
    (where / "sitecustomize.py").write_text(OWN_SITECUSTOMIZE)
    (where / "train.py").write_text(TRAIN)
    plain, under = _both(where / "train.py")
    assert plain.returncode == 0 and b"42 mine" in plain.stdout, plain.stderr[-2000:]
    assert under.returncode == 0, under.stderr[-3000:]
    assert under.stdout == plain.stdout
    assert b"Error in sitecustomize" not in under.stderr
    (run_dir,) = run_dirs(tmp_path / "runs")
    found = {f["id"]: f for f in load_report(run_dir)["findings"]}
    assert found["run.tensorflow"]["status"] == "ok"  # the hooks still saw it
    assert found["run.stall"]["status"] == "ok", found["run.stall"]  # and its steps


@pytest.mark.slow
def test_import_sitecustomize_without_one_fails_as_plainly(tmp_path: Path) -> None:
    (tmp_path / "job").mkdir()
    program = tmp_path / "job" / "probe.py"
    program.write_text(NO_SITECUSTOMIZE)
    plain, under = _both(program)
    assert plain.stdout == b"ImportError sitecustomize\n", plain.stdout
    assert under.returncode == plain.returncode == 0, under.stderr[-2000:]
    assert under.stdout == plain.stdout
