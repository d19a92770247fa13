"""The CLI's edges with TensorFlow behind them: each command as a new user types it, with
no --logdir, from an empty directory."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import gpudiag


# The README's commands as a new user types them: no --logdir, from an empty directory.
# Each runs for real (the default `runs` is parsed like a typed value) and writes its run
# directory under the current directory; scaling with the smallest workload.
@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "codes"),
    [
        (["env"], {0}),
        (["placement"], {0}),
        (["memory"], {0}),
        (["scaling", "--max-gpus", "1", "--steps", "4", "--warmup-steps", "1",
          "--profile-steps", "0"], {0, 1}),
        (["monitor", "--", "true"], {0}),
        (["run", "--", sys.executable, "-c", "pass"], {0}),
    ],
    ids=lambda v: v[0] if isinstance(v, list) else "",
)
def test_every_command_without_logdir_from_an_empty_directory(
        args: list[str], codes: set[int], tmp_path: Path) -> None:
    proc = gpudiag(*args, cwd=tmp_path, timeout=240)
    assert proc.returncode in codes, proc.stderr
    assert "Traceback" not in proc.stderr
    runs = tmp_path / "runs"
    made = [p for p in runs.iterdir() if p.is_dir()]
    assert len(made) == 1 and made[0].name.endswith(args[0])
    assert (made[0] / "report.json").is_file()
