"""A crash under `gpudiag run` as plainly (issue 26, cases 9 and 14): the traceback the
program prints has none of gpudiag's frames (an exception raised through gpudiag's
wrappers of tf.function and Model.fit), and a traceback the program prints itself before
``os._exit(1)`` is still recognised as its crash (run.crash). Each program runs plainly
and under `gpudiag run`; exit code, stdout and the printed traceback are compared.
docs/reliability.md counts these cases.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, load_report, run_dirs

ENV = {**os.environ, "PYTHONPATH": str(REPO), "TF_CPP_MIN_LOG_LEVEL": "2"}

TF_FUNCTION = """
import tensorflow as tf

def check(x):
    raise ValueError('bad batch')

@tf.function
def step(x):
    return check(x)

print('start', flush=True)
step(tf.constant(1.0))
"""
FIT_CALLBACK = """
import numpy as np
import tensorflow as tf
import keras

class Stop(keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        raise RuntimeError(f'checkpoint refused at epoch {epoch}')

model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])
model.compile('sgd', 'mse')
x, y = np.ones((32, 4), 'float32'), np.ones((32, 1), 'float32')
print('start', flush=True)
model.fit(x, y, epochs=2, verbose=0, callbacks=[Stop()])
"""
OWN_EXCEPTHOOK = """
import os, sys, traceback
import tensorflow as tf

def hook(kind, value, tb):
    traceback.print_exception(kind, value, tb)
    sys.stderr.flush()
    os._exit(1)  # threads of its own would hang a normal exit

sys.excepthook = hook

def load(path):
    return tf.io.read_file(path).numpy()

print('start', flush=True)
load('missing-file.txt')
"""


def _both(tmp_path: Path, program: str
          ) -> tuple[subprocess.CompletedProcess[bytes], subprocess.CompletedProcess[bytes]]:
    script = tmp_path / "train.py"
    script.write_text(program)
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, env=ENV,
                           cwd=tmp_path, timeout=300, stdin=subprocess.DEVNULL)
    under = subprocess.run([sys.executable, "-m", "gpudiag", "run", "--quiet", "--logdir",
                            str(tmp_path / "runs"), "--", sys.executable, str(script)],
                           capture_output=True, env=ENV, cwd=tmp_path, timeout=300,
                           stdin=subprocess.DEVNULL)
    return plain, under


def traceback_of(stderr: bytes) -> list[str]:
    """The first traceback printed, from its head to its exception line (autograph's
    generated file has a random name)."""
    lines = [re.sub(r"__autograph_generated_file\w+", "__autograph_generated_file", ln)
             for ln in stderr.decode("utf-8", "replace").splitlines()]
    start = lines.index("Traceback (most recent call last):")
    for end in range(start + 1, len(lines)):
        if lines[end] and not lines[end].startswith(" "):
            return lines[start:end + 1]
    return lines[start:]


@pytest.mark.slow
@pytest.mark.parametrize("program", [TF_FUNCTION, FIT_CALLBACK, OWN_EXCEPTHOOK],
                         ids=["tf-function", "fit-callback", "own-excepthook-os-exit"])
def test_the_programs_traceback_is_its_own_and_its_crash_is_seen(
        tmp_path: Path, program: str) -> None:
    plain, under = _both(tmp_path, program)
    assert plain.returncode == 1 and plain.stdout == b"start\n", plain.stderr[-3000:]
    assert under.returncode == plain.returncode, under.stderr[-3000:]
    assert under.stdout == plain.stdout
    printed = traceback_of(under.stderr)
    assert printed == traceback_of(plain.stderr)
    # none of gpudiag's frames: no file of its package (the clone's own folder may be named
    # gpudiag, and the program's TensorFlow frames run through that clone's .venv)
    package = f'"{REPO / "gpudiag"}{os.sep}'
    assert not any(package in line for line in printed), printed
    (run_dir,) = run_dirs(tmp_path / "runs")
    crash = {f["id"]: f for f in load_report(run_dir)["findings"]}["run.crash"]
    assert crash["status"] == "fail", crash
    assert crash["evidence"]["user_frame"]["file"].endswith("train.py"), crash
    assert printed[-1].split(":")[0].rsplit(".", 1)[-1] in crash["message"]
