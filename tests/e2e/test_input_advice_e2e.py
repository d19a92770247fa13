"""Advice checked against what the step waits for (issue 39): programs as keras-io writes
them under the real `gpudiag run`. Whether the advised fix helps and the one not advised
does not is measured on each program's twins by benchmarks/advice_twins.py (a speed ratio
is no test assertion: load moves it); the numbers it gave are in the docstrings here.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, run_program

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow



def test_an_xla_custom_loop_that_never_waits_for_input_gets_more_steps_a_call(
        tmp_path: Path) -> None:
    """keras-io's XLA custom loop (@tf.function(jit_compile=True) called from a Python
    loop over an unprefetched tf.data pipeline). Measured plainly on its twins (its
    --twins mode, which benchmarks/advice_twins.py runs; load average 2.8): 16 steps a
    call 0.74-0.75 against 1.35-1.41 ms a step, prefetch 1.37-1.42 (the issue's 0.86-0.91 against
    0.90-1.05). gpudiag must advise the first and not the second: next() is mostly its
    own cost on a full buffer, not input to hide. (Each epoch also starts with a 0.15 s
    stall, which the median leaves out.)"""
    program = PROGRAMS / "xla_custom_loop.py"
    r = run_program(tmp_path, PY, str(program))
    assert r.returncode == 0, r.stderr[-2000:]
    found = findings_by_id(r.report)
    b = found["run.bottleneck"]
    # the profiled window's compiled ops run 40-42 % of the step here (overhead-bound:
    # under half); a load burst in those 4 steps can lift them over half, and then no
    # cause stands out; the loop's own Python is 12-23 % of a loaded step (near the host
    # threshold, 20 %, which it may cross). Whichever of these leads, the fix is in the
    # step's call, never prefetch.
    # With both cores busy, no op may run in half the step call at all (the generic
    # overhead-bound: more steps a call too). Input is never named but as near its line.
    causes = b["evidence"]["causes"]
    near_input = "input-bound" in causes
    if near_input:  # with the cores shared, the whole run's input share spreads until its
        # interval reaches xprof's 20 % line (make test, 2026-11-30: 15 %, 9 %-21 %): then
        # named only as near it, first or after another cause. The verdict on fixed evidence
        # (15 % beyond next()'s own cost: more steps a call, no prefetch) is
        # tests/unit/test_run_verdicts.py's.
        ev = b["evidence"]["cause_evidence"]["input-bound"]
        assert (ev.get("against") or {}).get("side") == "near", b["message"]
        assert "near the threshold" in b["message"], b["message"]
    lead = causes[0] if causes else None  # input leading, only near its line: above
    if lead == "overhead-bound" and "XLA-compiled step" in b["message"]:
        assert "for _ in tf.range(N): train_step(*next(iterator))" in b["advice"]
    elif lead == "overhead-bound":  # the loop goes outside the XLA step
        assert "no op ran inside the step call" in b["message"], b["message"]
        assert "for _ in tf.range(N): train_step(*next(iterator))" in b["advice"]
    elif lead == "host-bound":
        assert "near the threshold" in b["message"], b["message"]
        assert "move the per-step Python work between the calls of" in b["advice"]
    elif lead is None:
        assert "not input-bound" in b["message"], b["message"]
        assert "run several steps in each call of tf.function train_step" in b["advice"]
    else:
        assert lead == "input-bound", b["message"]
    assert "num_parallel_calls" not in b["advice"]  # the pipeline has no map
    assert near_input or "prefetch(" not in b["advice"], b["advice"]
    (loop,) = found["run.throughput"]["evidence"]["loops"]
    w = loop["input"]
    # one statistic: the whole run's ratio, inside the interval of that same ratio
    assert w["statistic"] == "whole run" and w["low"] <= w["share"] <= w["high"]
    assert w["floor"]["calls"] == 20 and w["floor"]["floor_s"] > 0
    # the wait beyond next()'s own cost is what is left of next()'s time (under 20 % on a
    # quiet machine: the verdict on it is the unit test's, above)
    assert 0 <= w["hidden"]["share"] < w["share"]


def test_a_pydataset_whose_python_makes_the_batches_is_named_as_input(tmp_path: Path) -> None:
    """Keras's PyDataset as its docstring writes one (__getitem__ builds each batch
    example by example in NumPy), passed to fit. gpudiag names the PyDataset, its time a
    batch over every batch and its share of the step, and advises tf.data ops, not more
    thread workers. Measured plainly on its twins (its --twins mode, which
    benchmarks/advice_twins.py runs; load average 2.8): the tf.data twin 3.9 against
    6.1 ms a step, 4 thread workers 8.2 ms (no faster than 1); separately, 2 worker
    processes 8.1-9.9 ms (they compete with the step for the 2 cores)."""
    program = PROGRAMS / "pydataset_fit.py"
    r = run_program(tmp_path, PY, str(program))
    assert r.returncode == 0, r.stderr[-2000:]
    found = findings_by_id(r.report)
    b = found["run.bottleneck"]
    assert b["evidence"]["causes"][0] == "input-bound", b["message"]
    assert "of it taking a batch from the PyDataset ImagesPyDataset" in \
        found["run.throughput"]["message"]
    assert "fit takes each batch from the keras.utils.PyDataset ImagesPyDataset (its " \
        "__getitem__" in b["message"]
    (cause,) = [e["py_input"] for e in b["evidence"]["cause_evidence"].values()
                if "py_input" in e]
    assert cause["batches"] == 256 and cause["workers"] == 1  # 4 epochs of 64, every one
    assert cause["share"] >= 0.20
    assert cause["share"] == cause["median_s"] / cause["period_s"]
    assert b["advice"].startswith("tf.data ops instead of Python per batch")
    assert "use_multiprocessing" not in b["advice"] and "workers" not in b["advice"]


def test_a_pydatasets_thread_workers_are_timed_where_they_work(tmp_path: Path) -> None:
    """The same PyDataset with workers=4 (threads): their queue is full, so taking a batch
    is fast (0.07 ms), but their __getitem__ is Python holding the GIL beside the step
    (3.8 ms of CPU a batch here). gpudiag says the CPU a batch with its share, and that the
    threads share the GIL; 4 thread workers measured no faster than 1 on the twins."""
    r = run_program(tmp_path, PY, str(PROGRAMS / "pydataset_fit.py"), "--workers", "4")
    assert r.returncode == 0, r.stderr[-2000:]
    b = findings_by_id(r.report)["run.bottleneck"]
    (p,) = [e["py_input"] for e in b["evidence"]["cause_evidence"].values()
            if "py_input" in e]
    assert p["measure"] == "workers_cpu" and p["workers"] == 4
    assert p["cpu_median_s"] > 5 * p["median_s"]  # the work is on the workers, not the wait
    assert b["evidence"]["causes"][0] == "input-bound", b["message"]
    assert "whose 4 thread workers spend" in b["message"]
    assert "its 4 workers are threads" in b["advice"]
