"""The crashes people hit handing data to Keras's fit (gpudiag/catalogue/fitinput.py): each
reproduced with the installed Keras 3 and tf_keras, and named with its cause, its fix and
the program's line under a real `gpudiag run` (the programs' ground truth is written in
tests/programs/fit_workers_crash.py and numpy_function_map_crash.py). Real TensorFlow,
real child processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag import catalogue

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

#: The calls, made with each Keras named on the command line in turn (Keras 3 and tf_keras
#: in one process: one TensorFlow start for both); each line printed with its Keras's name.
FIT_INPUT_CODE = r"""
import sys
import numpy as np
import tensorflow as tf
def calls(keras):
    def show(f):
        try:
            f()
            print(keras.__name__, "no error")
        except Exception as e:
            print(keras.__name__, f"{type(e).__name__}: " + " ".join(str(e).split()))
    x = np.zeros((64, 8), "float32")
    y = np.zeros((64, 1), "float32")
    model = keras.Sequential([keras.Input((8,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    show(lambda: model.fit(x, y, workers=-1, verbose=0))
    show(lambda: model.fit(x, y, max_queue_size=0, verbose=0))
    show(lambda: model.fit(x, y, use_multiprocessing=True, verbose=0))
    show(lambda: model.evaluate(x, y, workers=2, verbose=0))
    show(lambda: model.fit_generator(iter([(x, y)]), steps_per_epoch=1, verbose=0))
    def load(i):
        return np.zeros(8, "float32"), np.float32(0)
    def fresh(*layers):
        m = keras.Sequential(list(layers))
        m.compile("sgd", "mse")
        return m
    unknown = tf.data.Dataset.range(64).map(
        lambda i: tuple(tf.numpy_function(load, [i], [tf.float32, tf.float32]))).batch(8)
    show(lambda: fresh(keras.layers.Dense(1)).fit(unknown, verbose=0))
    show(lambda: fresh(keras.Input((8,)), keras.layers.Dense(1)).fit(unknown, verbose=0))
    none_last = unknown.map(lambda a, b: (tf.ensure_shape(a, [None, None]), b))
    show(lambda: fresh(keras.layers.Dense(1)).fit(none_last, verbose=0))
for name in sys.argv[1:]:
    calls(__import__(name))
"""

# what each call above raises (None: no error), Keras 3 then tf_keras
EXPECTED = {
    "keras": ["keras3-fit-queue-arguments", "keras3-fit-queue-arguments",
              "keras3-fit-queue-arguments", "keras3-fit-queue-arguments",
              "keras3-fit-generator", "data-unknown-rank", "data-unknown-rank",
              "data-none-dimension"],
    "tf_keras": ["tf-keras-fit-not-positive", "tf-keras-fit-not-positive", None, None, None,
                 "data-unknown-rank", None, "data-none-dimension"],
}


@pytest.fixture(scope="module")
def printed_by_keras() -> dict[str, list[str]]:
    """FIT_INPUT_CODE's lines, Keras 3's then tf_keras's, by the Keras that printed them
    (without its name)."""
    proc = subprocess.run([PY, "-c", FIT_INPUT_CODE, "keras", "tf_keras"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    printed: dict[str, list[str]] = {"keras": [], "tf_keras": []}
    for line in proc.stdout.splitlines():
        name, _, said = line.partition(" ")
        printed.setdefault(name, []).append(said)  # a stray line: under its first word
    return printed


@pytest.mark.slow
@pytest.mark.parametrize("keras", ["keras", "tf_keras"])
def test_each_entry_names_what_the_installed_keras_raises(
        keras: str, printed_by_keras: dict[str, list[str]]) -> None:
    """The calls people make, with Keras 3 (``import keras``) and tf_keras: each crash is
    named by its entry; what tf_keras accepts (use_multiprocessing on arrays, evaluate's
    workers, fit_generator, a functional model fed unknown shapes) is no crash; every
    entry's example is a line printed here."""
    printed = printed_by_keras[keras]
    assert len(printed) == 8, printed_by_keras
    named = [None if line == "no error" else catalogue.match_crash(*line.split(": ", 1))
             for line in printed]
    assert [e.id if e else None for e in named] == EXPECTED[keras], printed
    for entry in catalogue.FIT_INPUT_ENTRIES:  # the examples: tf_keras's one, Keras 3's others
        if entry.id in EXPECTED[keras] and \
                (entry.id == "tf-keras-fit-not-positive") == (keras == "tf_keras"):
            assert any(line.startswith(entry.example[:60]) for line in printed), entry.id


def _run(tmp_path: Path, program: str, *args: str) -> tuple[int, dict[str, Any], str]:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--", PY,
                   str(PROGRAMS / program), *args, timeout=300)
    (run_dir,) = run_dirs(logdir)
    return proc.returncode, findings_by_id(load_report(run_dir)), proc.stdout + proc.stderr


def line_of(program: str, text: str) -> int:
    lines = (PROGRAMS / program).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@pytest.mark.slow
@pytest.mark.parametrize(("variant", "entry", "said"), [
    ((), "tf-keras-fit-not-positive", "Expected workers to be positive. Received is -1."),
    (("keras3",), "keras3-fit-queue-arguments",
     "TensorFlowTrainer.fit() got an unexpected keyword argument 'workers'"),
])
def test_fit_with_workers_left_in_is_named_with_the_argument_to_drop(
        tmp_path: Path, variant: tuple[str, ...], entry: str, said: str) -> None:
    rc, found, out = _run(tmp_path, "fit_workers_crash.py", *variant)
    crash = found["run.crash"]
    line = line_of("fit_workers_crash.py", "workers=-1, use_multiprocessing=True)")
    assert rc == 1 and crash["status"] == "fail", out[-3000:]  # the program's exit code
    assert crash["evidence"]["catalogue"] == entry
    assert said in crash["message"]
    assert f"at fit_workers_crash.py:{line} (`model.fit(" in crash["message"]
    assert crash["advice"].startswith("Drop ")
    assert "Read the traceback" not in crash["advice"]


@pytest.mark.slow
@pytest.mark.parametrize("variant", [(), ("tf_keras",)])
def test_a_numpy_function_map_without_shapes_is_traced_back_to_the_map(
        tmp_path: Path, variant: tuple[str, ...]) -> None:
    """The map's line, not fit's, gets the fix (set_shape / ensure_shape): the twin that
    sets the shape in the map (--fixed) trains, exit 0, and no crash is said."""
    program = "numpy_function_map_crash.py"
    rc, found, out = _run(tmp_path, program, *variant)
    crash = found["run.crash"]
    fit_line = line_of(program, "model.fit(train_ds")
    map_line = line_of(program, "train_ds.map(tf_random_noise)")
    assert rc == 1 and crash["status"] == "fail", out[-3000:]
    assert crash["evidence"]["catalogue"] == "data-unknown-rank"
    assert "as_list() is not defined on an unknown TensorShape" in crash["message"]
    assert f"at {program}:{fit_line}" in crash["message"]
    assert f"the shapes were lost at {program}:{map_line} " \
        "(`train_ds = train_ds.map(tf_random_noise)`): Dataset.map of tf_random_noise " \
        "through tf.numpy_function(random_noise) makes elements of shapes (<unknown>, ())" \
        in crash["message"]
    assert crash["advice"].startswith(f"At {program}:{map_line}: ")
    assert "set_shape" in crash["advice"] and "ensure_shape" in crash["advice"]
    rc, found, out = _run(tmp_path / "fixed", program, *variant, "--fixed")
    assert rc == 0 and found["run.crash"]["status"] == "ok", out[-3000:]
