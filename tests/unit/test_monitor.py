"""`gpudiag monitor`: real child commands, real report files, real signals.

NVML is absent on this machine, so the subprocess runs use the real (unavailable)
backend and must report skips. The runs with scripted GPUs give the fake backend where
the real one goes: to ``gpudiag.cli.main(argv, open_nvml=...)`` (or CliRunner's ``obj``,
the same click context object main fills) for the whole CLI, which opens and closes it,
or to ``monitor.run(backend=...)``, which only uses it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import fake_nvml
import pytest
from helpers import (
    REPO,
)

from gpudiag.cli import main
from gpudiag.cliopts import parse_gpus
from gpudiag.errors import UsageError
from gpudiag.procs.command import resolve_command

PY = sys.executable


def test_gpus_beyond_what_nvml_sees_is_exit_2(
    logdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    backend = fake_nvml.busy(n=2)
    rc = main(["monitor", "--logdir", str(logdir), "--gpus", "0,7", "--", PY, "-c", "pass"],
              open_nvml=lambda: backend)
    assert rc == 2
    err = capsys.readouterr().err
    assert err == "gpudiag: error: --gpus 7: there are 2 GPU(s) (indices 0..1)\n"
    assert backend.closed
    assert not logdir.exists()


def test_command_resolution() -> None:
    assert resolve_command([PY, "-c", "pass"]) == [PY, "-c", "pass"]
    with pytest.raises(UsageError, match="command is a directory"):
        resolve_command([str(REPO)])
    assert parse_gpus("1, 0,1") == (1, 0)
