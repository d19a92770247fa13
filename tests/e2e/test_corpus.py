"""`gpudiag run` on programs written the way the official material writes them
(tests/corpus/: TensorFlow's tutorials and guides, keras-io's examples, each file naming its
source and its adaptations), the diagnosis each must get; and the programs of issue 19's
cases (tests/programs/ten_class_loop.py, the class count).

Each program runs once, through the real CLI in a real child process, with the profiler
window off (--profile-steps 0: seconds saved; the window is tested in test_run_e2e.py).
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs, split_own_lines

PY = sys.executable
CORPUS = TESTS_DIR / "corpus"
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


def line_of(program: Path, text: str) -> int:
    """The line of ``program`` that contains ``text`` (the first)."""
    lines = program.read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if text in line)


@dataclass
class Run:
    returncode: int
    stdout: str
    stderr: str
    found: dict[str, dict[str, Any]]

    def failed(self) -> dict[str, str]:
        """The findings that failed, by id: what a wrong exit code was for."""
        return {k: f["message"] for k, f in self.found.items() if f["status"] == "fail"}


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Run]:
    done: dict[tuple[str, ...], Run] = {}

    def runner(program: Path, *args: str) -> Run:
        key = (str(program), *args)
        if key not in done:
            logdir = tmp_path_factory.mktemp(program.stem) / "runs"
            proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--", PY,
                           str(program), *args, timeout=300)
            (run_dir,) = run_dirs(logdir)
            report = load_report(run_dir)
            done[key] = Run(proc.returncode, proc.stdout, proc.stderr, findings_by_id(report))
        return done[key]

    return runner


def test_the_corpus_names_its_sources_and_adaptations() -> None:
    files = sorted(CORPUS.glob("*.py"))
    assert len(files) >= 8
    for f in files:
        head = f.read_text().split('"""')[1]
        assert "Source" in head and ("site/en/" in head or "keras-io" in head), f.name
        assert "Adapted only where" in head, f.name


# ---------------------------------------------------------------- issue 19: class counts


def test_a_slowly_learning_ten_class_loop_gets_no_guessed_class_count(
        run: Callable[..., Run]) -> None:
    r = run(PROGRAMS / "ten_class_loop.py", "slow")
    learning = r.found["run.learning"]
    (loop,) = learning["evidence"]["loops"]
    assert r.returncode == 0 and learning["status"] == "warn"
    assert "stuck at ln" not in learning["message"] and loop["stuck_at_ln_classes"] is None
    assert loop["num_classes"] == 10 and "SparseSoftmaxCrossEntropyWithLogits" in \
        loop["classes_from"]
    assert loop["last_loss"] > math.log(10) * 1.5  # far from ln 10, near ln k for some k


def test_a_really_stuck_ten_class_loop_is_caught_with_its_evidenced_classes(
        run: Callable[..., Run]) -> None:
    r = run(PROGRAMS / "ten_class_loop.py", "stuck")
    learning = r.found["run.learning"]
    (loop,) = learning["evidence"]["loops"]
    assert r.returncode == 0 and learning["status"] == "fail"  # the program's 0
    assert "stuck at ln 10 = 2.3026" in learning["message"]
    assert "the weights did not change at all" in learning["message"]
    assert loop["num_classes"] == 10 and "logits [batch, 10]" in loop["classes_from"]


# ---------------------------------------------------------------- the corpus


def test_custom_training_tutorial_under_keras3_crash_explained_from_the_whole_message(
        run: Callable[..., Run]) -> None:
    r = run(CORPUS / "custom_training.py")
    crash = r.found["run.crash"]
    assert r.returncode == 1 and crash["status"] == "fail"
    assert crash["evidence"]["catalogue"] == "lazy-variables-in-replica"
    assert "You must feed a value for placeholder tensor" in crash["message"]
    assert "at custom_training.py:" in crash["message"]
    assert "strategy.scope()" in crash["advice"] and "tf_keras" in crash["advice"]


def test_custom_training_tutorial_built_in_scope_learns(run: Callable[..., Run]) -> None:
    r = run(CORPUS / "custom_training_built.py")
    learning = r.found["run.learning"]
    (loop,) = learning["evidence"]["loops"]
    assert r.returncode == 0 and learning["status"] == "ok"
    assert loop["series"] == "tf.function distributed_train_step" and loop["num_classes"] == 10
    assert loop["last_loss"] < loop["first_loss"] * 0.7
    assert r.found["run.crash"]["status"] == "ok"
    assert r.found["run.distribution"]["evidence"]["strategies"][0]["replicas"] == 2


def test_custom_training_tutorial_with_the_loss_reduced_twice(run: Callable[..., Run]) -> None:
    r = run(CORPUS / "custom_training_loss_reduced_twice.py")
    crash = r.found["run.crash"]
    assert r.returncode == 1 and crash["evidence"]["catalogue"] == "average-loss-of-scalar"
    assert "Invalid value passed for `per_example_loss`" in crash["message"]
    assert "at custom_training_loss_reduced_twice.py:" in crash["message"]
    assert "Reduction.NONE" in crash["advice"]


def test_distributed_keras_tutorial_learns_on_both_replicas(run: Callable[..., Run]) -> None:
    r = run(CORPUS / "distributed_keras_fit.py")
    assert r.returncode == 0, r.failed()
    learning = r.found["run.learning"]
    (loop,) = learning["evidence"]["loops"]
    assert learning["status"] == "ok" and loop["num_classes"] == 10
    used = r.found["run.every-device-used"]
    assert used["status"] == "warn" and used["evidence"]["idle"] == []  # warn: no GPU here
    assert set(used["evidence"]["strategy_devices"]) == {"/device:CPU:0", "/device:CPU:1"}


def test_mnist_convnet_with_a_learning_rate_of_0(run: Callable[..., Run]) -> None:
    r = run(CORPUS / "mnist_convnet_lr0.py")
    learning = r.found["run.learning"]
    assert r.returncode == 0 and learning["status"] == "fail"  # the program's 0
    assert "the weights did not change at all" in learning["message"]
    assert "(the learning rate is 0)" in learning["message"]
    assert learning["evidence"]["loops"][0]["num_classes"] == 10


def test_mnist_convnet_with_logits_and_softmax_mixed_says_what_keras_warned(
        run: Callable[..., Run]) -> None:
    r = run(CORPUS / "mnist_convnet_from_logits.py")
    learning = r.found["run.learning"]
    assert learning["status"] == "warn"
    assert "Keras warned: UserWarning: `categorical_crossentropy` received " \
        "`from_logits=True`" in learning["message"]
    assert "(after mnist_convnet_from_logits.py:" in learning["message"]
    assert learning["advice"].startswith("Say it once")
    assert "from-logits-on-softmax" in r.found["run.tf-log"]["message"]
    # the program's own view is unchanged: Python printed the warning, once (gpudiag's own
    # table after it, on the same stderr, quotes it too)
    _, program_err, _ = split_own_lines(r.stderr.encode(), "run")
    assert program_err.decode().count("received `from_logits=True`") == 1


def test_quickstart_with_softmax_applied_twice_settles_at_the_floor(
        run: Callable[..., Run]) -> None:
    r = run(CORPUS / "quickstart_advanced_softmax_twice.py")
    learning = r.found["run.learning"]
    (loop,) = learning["evidence"]["loops"]
    assert r.returncode == 0 and learning["status"] == "fail"  # the program's 0
    assert "settled at 1.4612 = ln(1 + 9/e)" in learning["message"]
    assert loop["num_classes"] == 10 and "drop the last softmax" in learning["advice"]


def test_gpu_guide_invalid_device_soft_placed_eagerly(run: Callable[..., Run]) -> None:
    program = CORPUS / "gpu_guide_invalid_device.py"
    r = run(program)
    soft = r.found["run.soft-placement"]
    line = line_of(program, "with tf.device('/device:GPU:2')")
    assert r.returncode == 0 and soft["status"] == "fail"  # the program's 0
    assert f"eager ops under tf.device('/device:GPU:2') at gpu_guide_invalid_device.py:{line}" \
        in soft["message"]
    assert "/device:GPU:2 does not exist here and soft placement is on" in soft["message"]
    assert "/device:CPU:0" in soft["message"]


def test_gpu_guide_devices_configured_too_late(run: Callable[..., Run]) -> None:
    program = CORPUS / "gpu_guide_configured_too_late.py"
    r = run(program)
    devices = r.found["run.devices"]
    line = line_of(program, "tf.config.set_logical_device_configuration(")
    assert devices["status"] == "fail"
    assert f"at gpu_guide_configured_too_late.py:{line} was called after the devices were " \
        "initialised" in devices["message"]
    assert "Virtual devices cannot be modified after being initialized" in r.stdout
    memory = r.found["run.memory"]  # a CPU-only configuration: not a memory failure
    assert memory["status"] == "skip" and "did not take effect" not in memory["message"]


def test_gpu_guide_logical_device_created_and_never_used_is_named(
        run: Callable[..., Run]) -> None:
    r = run(CORPUS / "gpu_guide_logical_devices_unused.py")
    used = r.found["run.every-device-used"]
    assert r.returncode == 0 and used["status"] == "warn"
    assert used["evidence"]["idle"] == ["/device:CPU:2"]
    assert "/device:CPU:2, created by the program" in used["message"]
    assert "did no work" in used["message"]


def test_towers_pinned_to_gpus_that_do_not_exist(run: Callable[..., Run]) -> None:
    r = run(CORPUS / "towers_pinned_to_gpus.py")
    soft = r.found["run.soft-placement"]
    assert r.returncode == 0 and soft["status"] == "fail"  # the program's 0
    assert "pinned to /device:GPU:0" in soft["message"] and \
        "pinned to /device:GPU:1" in soft["message"]
    assert "ran on /device:CPU:0" in soft["message"]
    assert "tower_1" in soft["message"]
