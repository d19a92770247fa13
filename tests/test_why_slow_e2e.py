"""Why is it slow: `gpudiag run` on user-like programs whose time goes to different places
(tests/programs/), end to end through the real CLI in real child processes.

Each program times its own loop, start to start, and prints the median period of its
steady-state steps; gpudiag's step period must agree with it.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS_DIR, findings_by_id, gpudiag, run_dirs

from gpudiag import layout

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"
PERIOD_TOLERANCE = 0.05

pytestmark = pytest.mark.slow


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    report: dict[str, Any]

    @property
    def found(self) -> dict[str, dict[str, Any]]:
        return findings_by_id(self.report)

    @property
    def own_period_s(self) -> float:
        """The median step period the program measured itself."""
        return float(self.stdout.split("own period median ms:")[1].split()[0]) / 1e3

    @property
    def loop(self) -> dict[str, Any]:
        (loop,) = self.found["run.throughput"]["evidence"]["loops"]
        return loop


def run_program(tmp: Path, program: str, *args: str) -> Run:
    logdir = tmp / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, str(PROGRAMS / program), *args,
                   timeout=300)
    (run_dir,) = run_dirs(logdir)
    report = json.loads((run_dir / layout.REPORT_JSON).read_text())
    assert proc.returncode == 0, proc.stderr[-3000:]
    return Run(proc.returncode, proc.stdout, proc.stderr, run_dir, report)


@pytest.fixture(scope="module")
def custom_loop(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(tmp_path_factory.mktemp("loop"), "custom_loop_python_between.py")


@pytest.fixture(scope="module")
def input_bound(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(tmp_path_factory.mktemp("input"), "input_pipeline_fit.py")


def test_custom_loop_step_time_is_the_period_the_program_measures(custom_loop: Run) -> None:
    loop = custom_loop.loop
    assert loop["series"] == "tf.function train_step"
    assert loop["step_s_median"] == pytest.approx(custom_loop.own_period_s,
                                                  rel=PERIOD_TOLERANCE)
    # next(iterator) and the Python between the calls are outside the call, inside the step
    assert loop["call_s_median"] < 0.8 * loop["step_s_median"]
    assert loop["call_share"] == pytest.approx(loop["call_s_median"] / loop["step_s_median"])
    assert "examples_per_s" not in loop  # a custom loop's batch is not known
    assert "ms/step (start to start), the step call" in custom_loop.found["run.throughput"][
        "message"]


def test_fit_step_time_is_the_period_the_program_measures(input_bound: Run) -> None:
    loop = input_bound.loop
    assert loop["series"] == "Model.fit"
    assert loop["step_s_median"] == pytest.approx(input_bound.own_period_s,
                                                  rel=PERIOD_TOLERANCE)
    assert loop["examples_per_s"] == pytest.approx(32 / loop["step_s_median"])
    assert 0 < loop["call_share"] <= 1
