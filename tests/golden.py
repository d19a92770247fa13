"""Golden runs: each expensive `gpudiag` run that several tests assert on is made once per
test session and read by all of them (the conftest loads this module as a plugin).

A golden run is made on first request, under a lock, in a directory every pytest-xdist
worker of the session shares (its base temporary directory's parent): the first worker to
ask makes it, the others wait for it and read the same files. What a run printed is kept
beside it (``made.json``), so a test sees the terminal exactly as a user would have. Tests
read golden runs and never write into them: a command a test runs over one (`diff`,
`explain`) writes into the test's own ``--logdir``.

The runs, and who reads them:
- ``pipeline_pair``: tests/programs/input_pipeline_fit.py, a Keras fit fed by a serial
  per-example map, then the same program ``tuned`` (parallel map, cache, prefetch), each
  under `gpudiag run --profile-warmup 60` (48 batches an epoch: profiled in the second
  epoch) from the user's directory, printed at 80 and at 120 columns. Read by the diff,
  the terminal verdict, why-slow and the tab's browser tests.
- ``fit_tiny``: tests/programs/keras_fit_tiny.py under a plain `gpudiag run`: a small
  healthy Keras fit. Read by the run directory, steady-state and long-job tests.
- ``custom_loop``: tests/programs/custom_loop_python_between.py under a plain `gpudiag
  run`: a custom loop with Python between its steps. Read by why-slow, steady-state and
  long-job tests.
- ``retrace``: tests/programs/retrace_num_steps.py (the tf.function guide's retracing
  example) under a plain `gpudiag run`. Read by the host-causes tests and the tab's
  browser tests.
- ``mirrored_fit``: tests/programs/mirrored_fit.py (a Keras fit under MirroredStrategy on
  two virtual CPU devices) under a plain `gpudiag run`. Read by why-slow (the gradient
  bytes and bandwidth) and the HParams dashboard tests.
- ``scaling_two``: `gpudiag scaling --max-gpus 2 --strategy mirrored`, profiled, printed at
  80 columns: two virtual CPU devices. Read by the scaling test (what the devices are
  said to be) and the terminal verdict test (whole lines).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from helpers import TESTS_DIR, ProgramRun, gpudiag, program_run, run_dirs

PROGRAMS = TESTS_DIR / "programs"
MADE = "made.json"


@dataclass(frozen=True)
class Printed:
    """What one gpudiag command printed, and how it ended."""

    returncode: int
    stdout: str
    stderr: str


@dataclass(frozen=True)
class GoldenRuns:
    """A golden directory: the user's directory ``here`` (the commands ran from it), its
    ``runs/`` logdir, and what each command printed, in the order they ran."""

    here: Path
    printed: tuple[Printed, ...]

    @property
    def logdir(self) -> Path:
        return self.here / "runs"

    @property
    def run_dirs(self) -> list[Path]:
        return run_dirs(self.logdir)

    def program_run(self, index: int) -> ProgramRun:
        """The ``index``-th run as helpers.run_program gives one (its report checked
        against the report's JSON Schema)."""
        p = self.printed[index]
        return program_run(p.returncode, p.stdout, p.stderr, self.run_dirs[index])


def _shared_root(factory: pytest.TempPathFactory) -> Path:
    base = factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "golden"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def made_once(factory: pytest.TempPathFactory, name: str,
              make: Callable[[Path], list[subprocess.CompletedProcess[str]]]) -> GoldenRuns:
    """The golden directory ``name``: made by ``make(here)`` the first time any worker of
    the session asks, then read from disk. A make whose command did not exit 0 fails every
    test that reads it, with what it printed."""
    root = _shared_root(factory)
    here = root / name
    with _locked(root / f"{name}.lock"):
        done = here / MADE
        if not done.exists():
            here.mkdir(exist_ok=True)
            procs = make(here)
            done.write_text(json.dumps([[p.returncode, p.stdout, p.stderr] for p in procs]))
    printed = tuple(Printed(*p) for p in json.loads(done.read_text()))
    for p in printed:  # every golden command exits 0
        assert p.returncode == 0, (name, p.stderr[-3000:])
    return GoldenRuns(here, printed)


def _pipeline_pair(here: Path) -> list[subprocess.CompletedProcess[str]]:
    procs = []
    for columns, extra in ((80, ()), (120, ("tuned",))):
        procs.append(gpudiag(
            "run", "--profile-warmup", "60", "--logdir", "runs", "--", sys.executable,
            str(PROGRAMS / "input_pipeline_fit.py"), *extra,
            env={"COLUMNS": str(columns), "TERM": "dumb"}, cwd=here, timeout=400))
    return procs


def _plain_run(program: str) -> Callable[[Path], list[subprocess.CompletedProcess[str]]]:
    def make(here: Path) -> list[subprocess.CompletedProcess[str]]:
        return [gpudiag("run", "--logdir", "runs", "--", sys.executable,
                        str(PROGRAMS / program), cwd=here, timeout=400)]
    return make


@pytest.fixture(scope="session")
def pipeline_pair(tmp_path_factory: pytest.TempPathFactory) -> GoldenRuns:
    """The input-bound fit (printed at 80 columns), then its tuned twin (at 120)."""
    return made_once(tmp_path_factory, "pipeline_pair", _pipeline_pair)


def _plain_golden(name: str, program: str, doc: str) -> Callable[..., GoldenRuns]:
    """The session fixture ``name``: tests/programs/``program`` under a plain `gpudiag run`,
    made once (``doc``: what it is)."""
    def golden(tmp_path_factory: pytest.TempPathFactory) -> GoldenRuns:
        return made_once(tmp_path_factory, name, _plain_run(program))
    golden.__doc__ = doc
    return pytest.fixture(scope="session", name=name)(golden)


fit_tiny = _plain_golden("fit_tiny", "keras_fit_tiny.py",
                         "A small healthy Keras fit under a plain `gpudiag run`.")
custom_loop = _plain_golden("custom_loop", "custom_loop_python_between.py",
                            "A custom training loop (a tf.function step, Python work "
                            "between steps) under a plain `gpudiag run`.")
mirrored_fit = _plain_golden("mirrored_fit", "mirrored_fit.py",
                             "A Keras fit under MirroredStrategy on two virtual CPU devices, "
                             "plain `gpudiag run`.")
retrace = _plain_golden("retrace", "retrace_num_steps.py",
                        "A tf.function retraced at every call (a Python int argument) under "
                        "`gpudiag run`.")


#: The scaling golden run's options (tests/e2e/test_scaling.py's FAST: a small model,
#: profiled, histograms and an all-reduce probe kept small).
SCALING_TWO = ["scaling", "--max-gpus", "2", "--strategy", "mirrored", "--steps", "20",
               "--model", "mlp", "--warmup-steps", "3", "--profile-steps", "2",
               "--histogram-every", "5", "--allreduce-max-mb", "2"]


def _scaling_two(here: Path) -> list[subprocess.CompletedProcess[str]]:
    return [gpudiag(*SCALING_TWO, "--logdir", "runs", env={"COLUMNS": "80", "TERM": "dumb"},
                    cwd=here, timeout=600)]


@pytest.fixture(scope="session")
def scaling_two(tmp_path_factory: pytest.TempPathFactory) -> GoldenRuns:
    """`gpudiag scaling` on two virtual CPU devices (MirroredStrategy), at 80 columns."""
    return made_once(tmp_path_factory, "scaling_two", _scaling_two)
