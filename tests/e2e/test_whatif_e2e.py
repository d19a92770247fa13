"""One end-to-end pair per fix kind of benchmarks/whatif.py: the slow program and the fix
its bottleneck finding advises, each under a real `gpudiag run`, then `gpudiag diff A B`:
the slow run's finding predicts a step for the fix it names, and the diff puts that
prediction beside the fixed run's measurement with the error.

How close the predictions are is benchmarks/whatif.py's to measure (benchmarks/RESULTS.md,
"How close the predictions come": its table and the median absolute error, far from the
15 % goal today). A
single pair on a shared machine is one sample of what the benchmark pools over rounds:
its error is held to twice the benchmark's error for that kind plus 25 points (BENCHMARK
below, from the table), wide enough for one sample on 2 shared cores, narrow enough that
a model gone wrong fails (the steps_per_execution model before the call's edges were
measured: +129 % in one pair)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from helpers import REPO, gpudiag, run_dirs

from gpudiag import layout
from gpudiag.layout.diff import DiffRecord
from gpudiag.rundir import load_run

pytestmark = pytest.mark.slow
WORK = str(REPO / "benchmarks" / "_whatif_workload.py")

# kind: the error benchmarks/whatif.py reported (benchmarks/RESULTS.md's tables: measured /
# predicted - 1), the larger of its last two whole runs
BENCHMARK = {
    "input-bound, parallel map + prefetch": 1.06,
    "input-bound, generator replaced": -0.34,
    "overhead-bound, steps_per_execution=16": -0.46,
    "communication-bound, batch x2": -0.37,
}
ONE_SAMPLE_MARGIN = 0.25

# kind: slow argv, fixed argv, gpudiag run options
PAIRS = {
    "input-bound, parallel map + prefetch": (
        ["map", "slow"], ["map", "fixed"], ["--profile-warmup", "60"]),
    "input-bound, generator replaced": (["gen", "slow"], ["gen", "fixed"], []),
    "overhead-bound, steps_per_execution=16": (["spe", "1"], ["spe", "16"], []),
    "communication-bound, batch x2": (["mirrored", "4"], ["mirrored", "8"], []),
}


def run_pair(logdir: Path, slow: list[str], fixed: list[str], options: list[str]
             ) -> DiffRecord:
    made = []
    for argv in (slow, fixed):
        proc = gpudiag("run", *options, "--logdir", str(logdir), "--", sys.executable, WORK,
                       *argv, timeout=600)
        assert proc.returncode == 0, proc.stderr[-2000:]
        made = run_dirs(logdir)
    a, b = made
    proc = gpudiag("diff", "--json", "--logdir", str(logdir), str(a), str(b))
    assert proc.returncode == 0, proc.stderr[-2000:]
    return DiffRecord.from_dict(json.loads(proc.stdout)["data"][layout.DIFF_DATA_KEY])


@pytest.mark.parametrize("kind", list(PAIRS))
def test_the_prediction_stands_beside_the_fixed_runs_measurement(
        kind: str, tmp_path: Path) -> None:
    slow, fixed, options = PAIRS[kind]
    rec = run_pair(tmp_path / "runs", slow, fixed, options)
    (neck,) = rec.bottlenecks
    assert neck.predicted is not None, neck
    cause = neck.predicted.get("cause")
    if not cause or not kind.startswith(str(cause)):
        # the input-bound verdict of a small program on 2 shared cores can come out
        # overhead-bound in one run, the all-reduce's share under the threshold (issue 31's
        # verdict under load): then this pair does not exercise this kind's model, and
        # says so
        pytest.skip(f"the slow run was judged {cause or 'without a bottleneck'}, not {kind}")
    assert neck.predicted.get("step_s"), neck.predicted
    assert neck.predicted_step_s and neck.measured_step_s and neck.error is not None
    assert neck.error == pytest.approx(neck.measured_step_s / neck.predicted_step_s - 1)
    print(f"{kind}: predicted {neck.predicted_step_s * 1e3:.3f} ms, measured "
          f"{neck.measured_step_s * 1e3:.3f} ms ({neck.error:+.0%})")
    assert abs(neck.error) <= 2 * abs(BENCHMARK[kind]) + ONE_SAMPLE_MARGIN, (
        kind, neck.error, BENCHMARK[kind])
    # the prediction's interval, scaled alike, and whether the fixed run fell inside: one
    # sample of the coverage benchmarks/whatif.py counts over its rounds
    low, high = neck.predicted_low_s, neck.predicted_high_s
    assert low is not None and high is not None and low <= neck.predicted_step_s <= high
    assert neck.inside is (low <= neck.measured_step_s <= high)
    print(f"{kind}: interval {low * 1e3:.3f}-{high * 1e3:.3f} ms, "
          f"{'inside' if neck.inside else 'outside'}")
    if slow[0] == "spe":  # compared per training step: a call of 16 steps would be 16 x
        (loop,) = rec.loops  # B's per-step time, far above A's one step
        assert loop.b.median_s < loop.a.median_s and loop.ratio < 1, loop


def test_an_eager_loop_gets_no_made_up_number(tmp_path: Path) -> None:
    """An eager loop is profiled as one (its GradientTape step) and called host-bound by
    Python's dispatch, but the graph executor's dispatch cost is not in an eager trace:
    the prediction says why instead of a number."""
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", sys.executable, WORK, "eager",
                   timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (run_dir,) = run_dirs(logdir)
    f = load_run(run_dir).finding("run.bottleneck")
    assert f is not None and f["status"] == "warn", f
    assert "eager step" in f["message"]
    assert f["evidence"]["predicted"]["step_s"] is None and f["evidence"]["predicted"]["why"]
