"""The same program gets the same verdict (issue 37): a Keras fit on random labels, with no
seed (each run other weights and labels), run under the real `gpudiag run` twice (the
diff of two unseeded runs needs two); every finding's status, and the cause named by the
learning finding, the same each time. Its first losses differ from run to run (2.37 to 2.64 in six
runs), which once swung run.learning between FAIL and WARN: six such recorded runs are
judged alike in tests/unit/test_run_verdicts.py. How often a verdict holds over many runs,
idle and with both cores busy, is benchmarks/verdict_stability.py's count (the input-bound
and the healthy fit's verdicts: the golden runs' tests)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs, run_program

pytestmark = pytest.mark.slow

RUNS = 2


def _verdict(found: dict[str, dict[str, Any]]) -> dict[str, tuple[str, Any]]:
    out: dict[str, tuple[str, Any]] = {}
    for fid, f in found.items():
        ev = f.get("evidence") or {}
        cause: Any = None
        if fid == "run.learning":
            cause = tuple(loop["cause"] for loop in ev.get("loops", []))
        # the bottleneck's cause is not compared: on this tiny fit every share sits near
        # its threshold, and load moved the first cause between input- and overhead-bound
        # in CI (a threshold verdict load can move: benchmarks/verdict_stability.py counts it)
        out[fid] = (f["status"], cause)
    return out


def test_a_random_label_program_gets_the_same_statuses_and_causes_in_every_run(
        tmp_path: Path) -> None:
    program = str(TESTS_DIR / "programs" / "keras_random_labels.py")
    runs = [run_program(tmp_path / str(n), sys.executable, program) for n in range(RUNS)]
    first = _verdict(runs[0].found)
    assert first["run.learning"] == ("fail", ("not-learning",)), \
        runs[0].found["run.learning"]["message"]
    assert "stuck at ln 10 = 2.3026 or above" in runs[0].found["run.learning"]["message"]
    for r in runs[1:]:
        assert _verdict(r.found) == first
    assert all(r.returncode == runs[0].returncode for r in runs)
    # no seed set (the hooks watch tf.random.set_seed): diff does not call the loss's
    # run-to-run difference a change
    assert runs[0].found["run.devices"]["evidence"]["seed_calls"] == []
    proc = gpudiag("diff", str(runs[0].run_dir), str(runs[1].run_dir), "--logdir",
                   str(tmp_path / "diffs"), timeout=120)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    (diff_dir,) = run_dirs(tmp_path / "diffs")
    learning = findings_by_id(load_report(diff_dir))["diff.learning"]
    assert learning["status"] in ("ok", "skip"), learning["message"]
    assert "neither run sets a seed" in learning["message"]
    assert learning["evidence"]["seeded_a"] is False


SEEDED = """
import numpy as np
import keras
keras.utils.set_random_seed(3)
x = np.random.default_rng(0).standard_normal((256, 8)).astype("float32")
model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(2)])
model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, (x[:, 0] > 0).astype("int64"), batch_size=32, epochs=1, verbose=0)
"""


def test_a_seed_set_through_keras_is_recorded_with_its_line(tmp_path: Path) -> None:
    program = tmp_path / "seeded.py"
    program.write_text(SEEDED)
    r = run_program(tmp_path, sys.executable, str(program))
    calls = r.found["run.devices"]["evidence"]["seed_calls"]
    assert calls and calls[0].startswith("tf.random.set_seed(3) at seeded.py:4"), calls
