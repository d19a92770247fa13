"""Keras calls made one at a time from the program's loop (issue 46, item 1): the hook's
timing per call site (gpudiag.inprogram.kerascalls, on a plain class: no TensorFlow), the
verdict from plain records (gpudiag.verdicts.run.kerascalls), the headline that names them
where no step was measured, and one real `gpudiag run` of a DQN agent (slow)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

PROGRAMS = TESTS_DIR / "programs"


@pytest.mark.slow
def test_a_dqn_agent_calling_predict_and_fit_per_sample_is_named_at_its_lines(
        tmp_path: Path) -> None:
    """The agent as tutorials write it (tests/programs/dqn_keras_calls.py); its fixed twin
    (``fixed``: model(x), one train_on_batch per minibatch) replays faster, timed plainly on
    this project's 2-core machine: 11.6 s against 3.6 s as the test runs it (two replays),
    54.6 s against 2.7 s with four replays of 16 samples."""
    logdir = tmp_path / "runs"
    program = PROGRAMS / "dqn_keras_calls.py"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(program), timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = run_dirs(logdir)
    by_id = findings_by_id(load_report(run_dir))
    found = by_id["run.keras-calls"]
    memory = by_id["run.memory-over-calls"]  # read after every call: ~80 of them here
    assert len(memory["evidence"]["rss_after_calls"]) >= 60, memory
    lines = program.read_text().splitlines()
    fit_line = next(i for i, ln in enumerate(lines, 1) if "self.model.fit(state" in ln)
    assert found["status"] == "warn", found["message"]
    sites = {(s["method"], s["line"]): s for s in found["evidence"]["sites"]}
    assert sites[("fit", fit_line)]["calls"] == 20
    assert sites[("fit", fit_line)]["rows_max"] == 1
    assert sum(s["calls"] for (m, _), s in sites.items() if m == "predict") >= 30
    assert any(a["where"] == f"dqn_keras_calls.py:{fit_line}" and "train_on_batch" in a["what"]
               for a in found["actions"])
    assert "bottleneck: Keras calls in a loop" in proc.stdout + proc.stderr
    assert "bottleneck: not measured" not in proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_model_built_for_every_fold_is_named_with_building_it_once(tmp_path: Path) -> None:
    """K-fold cross-validation calling build_model() each fold
    (tests/programs/kfold_build_model.py, 3 folds here): each fold's fit traces its new
    model's functions; its twin ``reuse`` (built once, first weights restored) keeps memory
    flat and runs each fold several times faster, ``clear`` (clear_session) does neither."""
    logdir = tmp_path / "runs"
    program = PROGRAMS / "kfold_build_model.py"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(program), "folds=3", timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))["run.model-rebuilt"]
    lines = program.read_text().splitlines()
    fit_line = next(i for i, ln in enumerate(lines, 1) if "model.fit(x[train_idx]" in ln)
    assert found["status"] == "warn", found["message"]
    sites = {s["method"]: s for s in found["evidence"]["sites"]}
    assert sites["fit"]["models"] == 3 == sites["fit"]["calls"]
    assert sites["fit"]["line"] == fit_line and sites["evaluate"]["models"] == 3
    assert 0 < sites["fit"]["trace_s"] < sites["fit"]["total_s"]
    (action,) = found["actions"]
    assert action["where"] == f"kfold_build_model.py:{fit_line}"
    assert "build and compile the model once" in action["what"]
    assert "model.set_weights(initial)" in found["advice"]
