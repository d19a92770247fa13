"""Programs written for TF1 or for Keras 2, run under `gpudiag run` on TensorFlow 2.21 with
Keras 3: each crash named with its real cause and fix (gpudiag/catalogue/migrations.py),
and a parameter-server program that crashes before its cluster is used is a crash, not a
cluster failure. Real TensorFlow, real child processes; each program's ground truth is
written beside it (tests/programs/tf1_multitower.py, ps_tutorial_shards.py,
ps_tutorial_fit.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag import catalogue

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"


def _run(tmp_path: Path, *command: str) -> dict[str, dict]:  # type: ignore[type-arg]
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, *command)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    (run_dir,) = run_dirs(logdir)
    return findings_by_id(load_report(run_dir))


@pytest.mark.slow
@pytest.mark.parametrize(("variant", "entry", "said"), [
    ("no_scope_wrapper", "tf1-reuse-on-root-scope",
     "with tf.variable_scope(tf.get_variable_scope()):"),
    ("no_reuse", "tf1-variable-created-twice", "reuse_variables() after the first tower"),
    ("contrib", "tf1-contrib-removed", "tf_slim"),
])
def test_the_classic_tf1_multi_tower_crashes_are_named_with_their_real_fix(
        tmp_path: Path, variant: str, entry: str, said: str) -> None:
    found = _run(tmp_path, str(PROGRAMS / "tf1_multitower.py"), f"--variant={variant}")
    crash = found["run.crash"]
    assert crash["status"] == "fail" and crash["evidence"]["catalogue"] == entry, crash
    assert said in crash["advice"], crash["advice"]
    if variant == "no_scope_wrapper":  # TensorFlow's own hint is quoted, not given as fix
        assert "conv1/weights/ExponentialMovingAverage/ does not exist" in crash["message"]
        assert "tensorflow/models#901" in crash["message"]
        assert "AUTO_REUSE" not in crash["advice"]


@pytest.mark.slow
def test_the_ps_tutorials_shard_check_under_keras_3_is_a_crash_with_its_cause_not_a_cluster_failure(
        tmp_path: Path) -> None:
    found = _run(tmp_path, str(PROGRAMS / "ps_tutorial_shards.py"))
    crash = found["run.crash"]
    assert crash["evidence"]["catalogue"] == "keras3-sharded-assert", crash
    assert "assert len(emb_layer.weights) == 2" in crash["message"]
    assert "Keras 3 does not create ShardedVariables" in crash["message"]
    assert "TF_USE_LEGACY_KERAS=1" in crash["advice"]
    cluster = found["run.cluster"]
    assert cluster["status"] == "skip", cluster["message"]
    assert cluster["message"].startswith("the program crashed before it used its cluster")
    assert "died" not in cluster["message"]


@pytest.mark.slow
def test_the_ps_tutorials_model_fit_under_keras_3_is_a_crash_not_a_cluster_failure(
        tmp_path: Path) -> None:
    found = _run(tmp_path, str(PROGRAMS / "ps_tutorial_fit.py"), str(tmp_path / "work"))
    crash = found["run.crash"]
    assert crash["evidence"]["catalogue"] == "keras3-datasetcreator-removed", crash
    assert "TF_USE_LEGACY_KERAS=1" in crash["advice"]
    cluster = found["run.cluster"]
    assert cluster["status"] == "skip", cluster["message"]
    assert "chief-0 AttributeError: module 'keras.utils' has no attribute 'experimental'" \
        in cluster["message"]


KERAS3_CODE = r"""
import tensorflow as tf
def show(f):
    try:
        f()
    except Exception as e:
        print(f"{type(e).__name__}: {e}".splitlines()[0])
def tf_op_on_input():
    tf.reduce_mean(tf.keras.Input((4, 8)), axis=1)
model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(1)])
show(lambda: tf.keras.optimizers.legacy.SGD())
show(lambda: tf.keras.metrics.SparseCategoricalAccuracy().reset_states())
show(tf_op_on_input)
show(lambda: model.save(OUT + "/keras-model"))
show(lambda: model.save_weights(OUT + "/ckpt"))
show(lambda: tf.keras.layers.experimental.preprocessing.StringLookup)
show(lambda: tf.keras.models.load_model(OUT))
show(lambda: tf.keras.utils.experimental.DatasetCreator)
"""


def test_keras_3s_removals_are_each_named_from_the_text_keras_3_prints_here(
        tmp_path: Path) -> None:
    """Each Keras 3 entry against what Keras 3 (TensorFlow 2.21's tf.keras) raises here
    for the Keras 2 call a tutorial makes; and each example is that text."""
    proc = subprocess.run([PY, "-c", f"OUT = {str(tmp_path)!r}\n" + KERAS3_CODE],
                          capture_output=True, text=True, timeout=300)
    printed = [ln.replace(str(tmp_path), "/tmp/tf29") for ln in proc.stdout.splitlines()]
    assert len(printed) == 8, proc.stdout + proc.stderr[-3000:]
    named = [catalogue.match_crash(*line.split(": ", 1)) for line in printed]
    assert [e.id if e else None for e in named] == [
        "keras3-legacy-optimizer", "keras3-reset-states", "keras3-kerastensor-tf-op",
        "keras3-save-extension", "keras3-save-weights-extension",
        "keras3-layers-experimental", "keras3-load-savedmodel",
        "keras3-datasetcreator-removed"]
    for line, entry in zip(printed, named, strict=True):
        assert entry is not None and "TF_USE_LEGACY_KERAS=1" in entry.fix
        assert line.startswith(entry.example.splitlines()[0][:60]), (line, entry.example)
