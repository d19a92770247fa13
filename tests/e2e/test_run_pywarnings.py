"""Python warnings of Keras recorded by gpudiag's hooks without changing what the program
sees: its own showwarning still receives them, catch_warnings(record=True) still catches
them, the output is the same with and without the hooks (gpudiag.inprogram.pywarnings)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR

from gpudiag.commands.run import program_env
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.run import eventfiles

PY = sys.executable
PROGRAM = TESTS_DIR / "programs" / "keras_warns.py"


def _own(stdout: str) -> list[str]:
    return [ln for ln in stdout.splitlines() if ln.startswith(("MINE ", "caught "))]


@pytest.mark.slow
def test_keras_warnings_recorded_and_the_programs_view_unchanged(tmp_path: Path) -> None:
    plain_env = {**os.environ, "PYTHONPATH": "", "TF_CPP_MIN_LOG_LEVEL": "2"}
    plain = subprocess.run([PY, str(PROGRAM)], env=plain_env, capture_output=True, text=True,
                           timeout=120)
    events_dir = tmp_path / "ev"
    config = RunHookConfig(events_dir=str(events_dir), run_dir=str(tmp_path))
    hooked = subprocess.run([PY, str(PROGRAM)], env=program_env(plain_env, config),
                            capture_output=True, text=True, timeout=120)
    assert plain.returncode == hooked.returncode == 0
    assert "MINE UserWarning: \"`sparse_categorical_crossentropy` received" in plain.stdout
    assert "caught 1 UserWarning" in plain.stdout
    # the program's own handling saw the same (the placement log the hooks turn on prints
    # to stdout too; `gpudiag run`'s parent keeps it out of the terminal)
    assert _own(hooked.stdout) == _own(plain.stdout) == plain.stdout.splitlines()
    (obs,), _ = eventfiles.observe_all(events_dir)
    assert len(obs.py_warnings) == 1  # the same warning, location and text: recorded once
    w = obs.py_warnings[0]
    assert w.category == "UserWarning" and "received `from_logits=True`" in w.message
    assert "keras" in w.file and w.user_frame is not None
    assert w.user_frame["file"] == str(PROGRAM) and w.user_frame["function"] == "loss_of"
