"""Advice checked against what the step waits for (issue 39): programs as keras-io writes
them under the real `gpudiag run`, each against its twins timed plainly in the same test
(the machine is shared: each variant runs twice, alternated, and its faster run counts;
each run prints its own steady time a step: the XLA loop the median period between its
calls after the first epoch, the PyDataset fit its fastest epoch after the first).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TESTS_DIR, findings_by_id, run_program

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


def plain_ms_per_step(program: Path, *args: str) -> float:
    """The program run plainly (no gpudiag): its own steady ms per step."""
    proc = subprocess.run([PY, str(program), *args], capture_output=True, text=True,
                          timeout=120, check=True)
    return float(re.search(r"steady ([0-9.]+) ms/step", proc.stdout)[1])  # type: ignore[index]


def test_an_xla_custom_loop_that_never_waits_for_input_gets_more_steps_a_call(
        tmp_path: Path) -> None:
    """keras-io's XLA custom loop (@tf.function(jit_compile=True) called from a Python
    loop over an unprefetched tf.data pipeline). Measured plainly here (quiet machine,
    load average 1.5): 16 steps a call 0.53-0.67 against 0.97-1.00 ms a step, prefetch
    0.91-1.04 (the issue's 0.86-0.91 against 0.90-1.05). gpudiag must advise the first
    and not the second: next() is mostly its own cost on a full buffer, not input to
    hide. (Each epoch also starts with a 0.15 s stall, which the median leaves out.)"""
    program = PROGRAMS / "xla_custom_loop.py"
    r = run_program(tmp_path, PY, str(program))
    assert r.returncode == 0, r.stderr[-2000:]
    found = findings_by_id(r.report)
    b = found["run.bottleneck"]
    assert b["evidence"]["causes"][0] == "overhead-bound", b["message"]
    assert "XLA-compiled step" in b["message"]
    assert "for _ in tf.range(N): train_step(*next(iterator))" in b["advice"]
    assert ".prefetch(tf.data.AUTOTUNE)" not in b["advice"]
    (loop,) = found["run.throughput"]["evidence"]["loops"]
    w = loop["input"]
    # one statistic: the share is the median of the blocks, inside its own interval
    assert w["statistic"] == "median of blocks" and w["low"] <= w["share"] <= w["high"]
    assert w["floor"]["calls"] == 30 and 0 < w["floor"]["floor_s"] < w["wait_s_median"]
    assert w["hidden"]["share"] < 0.20  # the wait beyond next()'s own cost
    # the twins, timed plainly
    plain, steps16, prefetch = [], [], []
    for _ in range(2):
        plain.append(plain_ms_per_step(program))
        steps16.append(plain_ms_per_step(program, "--steps-per-call", "16"))
        prefetch.append(plain_ms_per_step(program, "--prefetch"))
    assert min(steps16) < 0.8 * min(plain), (plain, steps16)
    assert min(prefetch) > 0.85 * min(plain), (plain, prefetch)


def test_a_pydataset_whose_python_makes_the_batches_is_named_as_input(tmp_path: Path) -> None:
    """Keras's PyDataset as its docstring writes one (__getitem__ builds each batch
    example by example in NumPy), passed to fit. gpudiag names the PyDataset, its time a
    batch over every batch and its share of the step, and advises tf.data ops, not more
    thread workers. Measured plainly here (loaded machine): the tf.data twin 1.6-1.9x
    faster a step, 4 thread workers no faster than 1 (8.2-8.3 against 6.0-8.2 ms), 2
    worker processes slower (9.9 ms: they compete with the step for the 2 cores)."""
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
    plain, tf_data = [], []
    for _ in range(2):
        plain.append(plain_ms_per_step(program))
        tf_data.append(plain_ms_per_step(program, "--tf-data"))
    threads = plain_ms_per_step(program, "--workers", "4")
    assert min(tf_data) < 0.8 * min(plain), (plain, tf_data)
    assert threads > 0.9 * min(plain), (plain, threads)
