"""Every finding's title (the answer in at most 72 characters) and gpudiag.layout.units' one rule
for durations and shares.

The plain-data verdict tests (tests/test_verdicts_*.py, tests/unit/test_run_verdicts.py) build
most families; conftest's autouse check asserts the title of every Finding gpudiag's code
builds in any test, and load_report the title of every finding a command writes. This
module builds, with plain data, the families those tests leave to the slow end-to-end runs,
and checks the families whose title carries the answer's numbers.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from helpers import assert_title

from gpudiag.errors import UsageError
from gpudiag.layout.diff import LoopDiff, Median
from gpudiag.layout.events import DebugMode
from gpudiag.layout.families import TITLE_MAX, family_of
from gpudiag.layout.units import duration, ms_number, ratio, share
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Finding
from gpudiag.rundir import load_run
from gpudiag.session import RunSession
from gpudiag.verdicts.bottleneck import cause_title
from gpudiag.verdicts.common import title
from gpudiag.verdicts.diff_steptime import step_finding
from gpudiag.verdicts.run import (
    callbacks,
    gpu_idle,
    hostcauses,
    live,
    outcome,
    process,
    progress,
    retracing,
)
from gpudiag.verdicts.run import crash as run_crash
from gpudiag.verdicts.run import placement as run_placement
from gpudiag.verdicts.run.gpu_idle import IdleGpu


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0326, "32.6 ms"), (0.012345, "12.3 ms"), (0.12345, "123 ms"), (1.5, "1500 ms"),
    (0.00035, "0.350 ms"), (0.0027, "2.70 ms"), (0.009996, "10.0 ms"), (0.0, "0 ms"),
    (0.0000012, "0.001 ms"), (None, "n/a")])
def test_a_duration_is_ms_with_at_least_three_significant_digits(seconds, text) -> None:
    assert duration(seconds) == text


def test_shares_and_ratios_have_one_form() -> None:
    assert (share(0.4712), share(1.0), share(None)) == ("47 %", "100 %", "n/a")
    assert (ratio(2.6612), ms_number(0.0326)) == ("2.66x", "32.6")
    assert duration(math.inf) == "inf ms"


def test_a_title_is_the_first_option_that_fits_never_a_cut_one() -> None:
    long = "x" * (TITLE_MAX + 1)
    assert title("short enough", "other") == "short enough"
    assert title(long, "the shorter sentence") == "the shorter sentence"
    whole = title(long, "word " * 30)  # even the last does not fit: whole words only
    assert len(whole) <= TITLE_MAX and whole.endswith("word") and "..." not in whole


def test_the_bottleneck_title_names_its_cause_share_and_step() -> None:
    assert cause_title("input-bound", 0.47, 0.0326) == \
        "input-bound: 47 % of a 32.6 ms step waits for input"
    named = cause_title("host-bound", 0.3, 0.01, "fit")
    assert named == "fit: host-bound: 30 % of a 10.0 ms step is Python between step calls"
    assert cause_title("host-bound", 0.3, 0.01, "train_step") == named.removeprefix("fit: ")
    assert cause_title("gpu-bound", 0.8, 0.01, "a" * 60) == \
        "GPU-bound: kernels run 80 % of a 10.0 ms step"


def _loop(verdict: str, ratio_: float, low: float | None, high: float | None) -> LoopDiff:
    a = Median(0.027, 0.0265, 0.0275, 200)
    b = Median(0.027 * ratio_, None, None, 200)
    return LoopDiff("Model.fit", "Model.fit", a, b, ratio_, low, high, verdict)


@pytest.mark.parametrize(("loop", "expected"), [
    (_loop("faster", 0.376, 0.366, 0.386),
     "Model.fit: B is 2.66x faster (95 % CI 2.59-2.73): 27.0 -> 10.2 ms a step"),
    (_loop("slower", 1.5, 1.4, 1.6),
     "Model.fit: B is 1.50x slower (95 % CI 1.40-1.60): 27.0 -> 40.5 ms a step"),
    (_loop("no change", 1.0, 0.97, 1.03),
     "no change: B/A 1.00 (95 % CI 0.97-1.03): 27.0 -> 27.0 ms a step"),  # no room
    (_loop("unknown", 0.5, None, None),
     "Model.fit: cannot tell: too few steps (B/A 0.50): 27.0 -> 13.5 ms a step"),
])
def test_the_diff_title_says_faster_or_slower_with_its_interval_first(loop, expected) -> None:
    f = step_finding(loop)
    assert f.title == expected
    assert_title(f.id, f.title)


def _obs() -> ProcessObservation:
    return ProcessObservation(pid=11, ppid=None, argv=["python", "train.py"], start_env={})


def _idle() -> IdleGpu:
    return IdleGpu(1, 3.0, 1000.0, 70.0, 1067.0, ((0, 93.0),))


# Families whose findings the plain-data tests do not build (the slow runs do): each with
# the data that makes it, one case per answer.
BUILDERS: dict[str, Callable[[], Finding | None]] = {
    "run.command ok": lambda: progress.command(["python", "t.py"], 0, 12.3, False),
    "run.command fail": lambda: progress.command(["python", "t.py"], -9, 2.0, False),
    "run.command interrupted": lambda: progress.command(["python", "t.py"], -2, 2.0, True),
    "run.stall none": lambda: live.stall(_obs()),
    "run.finite-loss none": lambda: live.finite_loss(_obs()),
    "run.saved-output": lambda: outcome.saved_output(["stdout.txt: ENOSPC"]),
    "run.saved-output kept free": lambda: outcome.saved_output([], ["stdout.txt: 1 MiB left"]),
    "run.descendants": lambda: outcome.survivors([(42, "sleep 100")], [], True),
    "run.tensorflow none": lambda: process.tensorflow_seen(
        [], python_command=True, hook_errors=[], unreadable_lines=0),
    "run.tensorflow not python": lambda: process.tensorflow_seen(
        [], python_command=False, hook_errors=[], unreadable_lines=0),
    "run.tensorflow unentered": lambda: process.tensorflow_seen(
        [], python_command=True, hook_errors=[], unreadable_lines=0,
        unentered=[(5, "python -I x.py", "-I")]),
    "run.placement": lambda: run_placement.placement(
        _obs(), {"/device:CPU:0": 12}, 10, 2, None),
    "run.placement unseen": lambda: run_placement.placement(_obs(), None, 0, 0, "no log"),
    "run.gpu-idle": lambda: gpu_idle.gpu_idle([_idle()], gpus=2, observed_s=80.0),
    "run.gpu-idle none": lambda: gpu_idle.gpu_idle([], gpus=2, observed_s=80.0),
    "run.gpu-idle short": lambda: gpu_idle.gpu_idle([], gpus=2, observed_s=5.0),
    "run.gpu-idle one": lambda: gpu_idle.gpu_idle([], gpus=1, observed_s=80.0),
    "run.retracing none": lambda: retracing.retracing(_obs()),
    "run.eager-loop none": lambda: hostcauses.eager_loop(_obs(), 5),
    "run.debug-mode": lambda: hostcauses.debug_modes(replace(_obs(), debug_modes=[DebugMode(
        "tf.data.experimental.enable_debug_mode", True, {"file": "a.py", "line": 3})])),
    "run.callbacks none": lambda: callbacks.callbacks(_obs(), 5),
    "run.learning none": lambda: progress.learning(_obs()),
    "run.profile none": lambda: progress.profile(_obs(), None, None, "no loop", 5),
    "run.crash none": lambda: run_crash.crash([_obs()], 0),
    "run.crash killed": lambda: run_crash.crash([_obs()], -9),
}


@pytest.mark.parametrize("case", sorted(BUILDERS))
def test_each_family_left_to_the_slow_runs_makes_a_titled_finding(case: str) -> None:
    f = BUILDERS[case]()
    assert f is not None
    assert family_of(f.id) is not None and f.id.startswith(case.split()[0])
    assert_title(f.id, f.title)


def test_bad_input_found_mid_run_is_a_titled_error_finding(tmp_path: Path) -> None:
    with pytest.raises(UsageError), RunSession("run", tmp_path) as s:
        raise UsageError("--steps must be at least 1, got 0")
    (f,) = load_run(s.run_dir).report.findings
    assert (f.id, f.title) == ("run.error", "--steps must be at least 1, got 0")
