"""`gpudiag run` on real user-like TensorFlow programs (tests/programs/), end to end.

Each program runs once, through the real CLI in a real child process (module-scoped
fixtures); the tests read what a user reads: the exit code, the terminal, report.json,
the saved output, the TensorBoard run and the trace. No GPU here: the programs use the
CPU and, where they need several devices, split it themselves.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, read_scalars, run_program
from helpers import ProgramRun as Run

from gpudiag import layout
from gpudiag.readers import traces
from gpudiag.run import eventfiles

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def keras_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(tmp_path_factory.mktemp("keras"), PY,
                       str(PROGRAMS / "keras_cannot_learn.py"))


@pytest.fixture(scope="module")
def mirrored_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(tmp_path_factory.mktemp("mirrored"), PY,
                       str(PROGRAMS / "mirrored_custom_loop.py"))


@pytest.fixture(scope="module")
def towers_run(tmp_path_factory: pytest.TempPathFactory) -> Run:
    return run_program(tmp_path_factory.mktemp("towers"), PY,
                       str(PROGRAMS / "towers_soft_placed.py"))


# ---------------------------------------------------------------- Keras fit that cannot learn


def test_keras_fit_learning_finding_says_ln10_and_weights_never_moved(keras_run: Run) -> None:
    learning = keras_run.found["run.learning"]
    assert learning["status"] == "fail"
    assert "stuck at ln 10 = 2.3026" in learning["message"]
    assert "the weights did not change at all" in learning["message"]
    assert "not a device problem" in learning["message"]
    assert "learning rate is 0" in learning["message"]
    (loop,) = learning["evidence"]["loops"]
    assert loop["num_classes"] == 10 and loop["weights_moved"] is False
    assert math.isclose(loop["last_loss"], math.log(10), rel_tol=1e-3)


def test_keras_run_forwards_exit_and_keeps_the_terminal_as_the_program_had_it(
        keras_run: Run) -> None:
    assert keras_run.returncode == 0  # the program's own code; a check failed (learning)
    assert keras_run.found["run.learning"]["status"] == "fail"
    assert keras_run.found["run.command"]["status"] == "ok"
    assert "final loss 2.3026" in keras_run.stdout
    # gpudiag asks TensorFlow for no placement log (nothing per op): where the ops ran
    # comes from its placement window (TensorFlow's run metadata, in the events).
    assert "Executing op" not in keras_run.stderr and "placer.cc" not in keras_run.stderr
    assert ": (MatMul): /job:" not in keras_run.stdout
    assert "Executing op" not in keras_run.saved("stderr.txt")
    assert "GPUDIAG-RUN" not in keras_run.stderr + keras_run.stdout
    assert keras_run.report["data"]["run"]["placement_rows"] > 100


def test_keras_run_reports_devices_throughput_and_the_profiled_window(keras_run: Run) -> None:
    found = keras_run.found
    assert found["run.tensorflow"]["status"] == "ok"
    assert "/device:CPU:0" in found["run.devices"]["message"]
    assert found["run.placement"]["evidence"]["ops_by_device"]["/device:CPU:0"] > 50
    throughput = found["run.throughput"]
    assert throughput["status"] == "ok"
    (loop,) = throughput["evidence"]["loops"]
    assert loop["series"] == "Model.fit" and loop["batch_size"] == 64
    # warm-up, profiled and the one after them, each epoch's last
    assert loop["timed_steps"] == 64 - 10 - 5 - 1 - 2
    assert loop["examples_per_s"] == pytest.approx(64 / loop["step_s_median"])
    profile = found["run.profile"]
    assert profile["status"] == "ok"
    assert profile["evidence"]["profile"]["steps"] == [10, 11, 12, 13, 14]
    busy = profile["evidence"]["busy_s"]
    assert busy["/device:CPU:0"] > 0


def test_keras_run_writes_the_programs_tensorboard_run_and_trace(keras_run: Run) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    (pid,) = [p["pid"] for p in keras_run.report["data"]["run"]["tensorflow_processes"]]
    tb_dir = keras_run.run_dir / layout.run_tb_name(pid)
    scalars = read_scalars(tb_dir)
    assert {layout.TAG_RUN_LOSS, "program/accuracy", layout.TAG_RUN_STEP_TIME,
            layout.TAG_RUN_EXAMPLES_PER_S} <= set(scalars)
    losses = scalars[layout.TAG_RUN_LOSS]
    assert len(losses) == 64 and all(abs(e.value - math.log(10)) < 1e-3 for e in losses)
    (xplane,) = traces.find_xplanes(tb_dir)
    assert xplane.parent.parent.name == "profile" and xplane.name.endswith(".xplane.pb")
    summary = traces.summarize(xplane)
    assert summary.step_markers == 5
    report_tb = EventAccumulator(str(keras_run.run_dir / layout.REPORT_TB_RUN),
                                 size_guidance={"tensors": 0})
    report_tb.Reload()
    assert {layout.TAG_REPORT, layout.TAG_RUN_TABLE} <= set(report_tb.Tags()["tensors"])


# ---------------------------------------------------------------- MirroredStrategy custom loop


def test_mirrored_strategy_recorded_with_replicas_devices_and_all_reduce(
        mirrored_run: Run) -> None:
    assert mirrored_run.returncode == 0, mirrored_run.stderr[-2000:]
    dist = mirrored_run.found["run.distribution"]
    (strategy,) = dist["evidence"]["strategies"]
    assert strategy["class"] == "MirroredStrategy" and strategy["replicas"] == 2
    assert strategy["worker_devices"] == ["/device:CPU:1", "/device:CPU:2"]
    assert strategy["cross_device_ops"] == "CollectiveAllReduce"
    assert strategy["implementation"] == "RING" and strategy["nccl"] is False
    assert strategy["where"] == "at mirrored_custom_loop.py:13"
    # TensorFlow's INFO line, hidden from the user by its logger level, was captured.
    assert any(m["id"] == "mirrored-devices" for m in dist["evidence"]["tf_log"])
    assert "Using MirroredStrategy" not in mirrored_run.stderr
    devices = mirrored_run.found["run.devices"]
    (call,) = devices["evidence"]["config_calls"]
    assert call["api"] == "tf.config.set_logical_device_configuration"
    assert call["devices_initialized_before"] is False and call["error"] is None


def test_mirrored_loop_placement_per_device_from_tensorflows_own_log(mirrored_run: Run) -> None:
    ops = mirrored_run.found["run.placement"]["evidence"]["ops_by_device"]
    assert ops["/device:CPU:1"] > 20 and ops["/device:CPU:2"] > 20
    used = mirrored_run.found["run.every-device-used"]
    assert used["status"] == "warn"  # every device worked; warn: no GPU here
    assert used["evidence"]["idle"] == []
    busy = mirrored_run.found["run.profile"]["evidence"]["busy_s"]
    assert busy["/device:CPU:1"] > 0 and busy["/device:CPU:2"] > 0
    soft = mirrored_run.found["run.soft-placement"]
    assert soft["status"] == "ok" and soft["evidence"]["compared_nodes"] > 20


def test_mirrored_loop_step_function_timed_and_its_loss_read(mirrored_run: Run) -> None:
    (loop,) = mirrored_run.found["run.throughput"]["evidence"]["loops"]
    assert loop["series"] == "tf.function distributed_train_step"
    # warm-up, profiled and the one after them; the last call has no next start
    assert loop["timed_steps"] == 40 - 10 - 5 - 1 - 1
    learning = mirrored_run.found["run.learning"]
    assert learning["status"] == "ok", learning["message"]
    (row,) = learning["evidence"]["loops"]
    assert row["last_loss"] < row["first_loss"] and row["weights_moved"] is True
    printed = float(mirrored_run.stdout.split("final loss")[1].split()[0])
    assert row["last_loss"] == pytest.approx(printed, abs=1e-4)  # the last call's loss


# ---------------------------------------------------------------- tf.compat.v1 towers


def test_towers_soft_placed_on_cpu0_are_found_whatever_their_names(towers_run: Run) -> None:
    soft = towers_run.found["run.soft-placement"]
    assert soft["status"] == "fail"
    moved = {r["requested"]: r for r in soft["evidence"]["moved"]}
    assert set(moved) == {"/device:GPU:0", "/device:GPU:1"}
    assert all(r["ran_on"] == "/device:CPU:0" and not r["exists"] for r in moved.values())
    assert moved["/device:GPU:1"]["scopes"] == ["tower_1"]
    assert "soft placement moved the work silently" in soft["message"]
    stats = towers_run.found["run.placement"]["evidence"]["session_nodes_by_device"]
    assert list(stats) == ["/device:CPU:0"]
    busy = towers_run.found["run.profile"]["evidence"]["busy_s"]
    assert list(busy) == ["/device:CPU:0"]  # tower_1's ops count on CPU:0, not on a "tower"


def test_towers_session_config_and_run_steps(towers_run: Run) -> None:
    config = towers_run.found["run.session-config"]
    assert "allow_soft_placement=True" in config["message"]
    learning = towers_run.found["run.learning"]
    assert learning["status"] == "ok"
    assert learning["evidence"]["loops"][0]["series"].startswith("Session.run #1")
    assert "GPU trace was not collected" not in towers_run.stderr  # gpudiag's FULL_TRACE


# ---------------------------------------------------------------- crash, SIGKILL, log level


def test_invalid_device_crash_is_explained_with_the_fix_and_the_users_frame(
        tmp_path: Path) -> None:
    r = run_program(tmp_path, PY, str(PROGRAMS / "invalid_device_crash.py"))
    assert r.returncode == 1
    assert "InvalidArgumentError" in r.stderr  # the user still sees the traceback
    crash = r.found["run.crash"]
    assert crash["status"] == "fail" and crash["evidence"]["catalogue"] == "invalid-device"
    assert crash["evidence"]["user_frame"]["function"] == "build_model"
    assert crash["evidence"]["user_frame"]["line"] == 13
    assert "in build_model() at invalid_device_crash.py:13" in crash["message"]
    assert "list_logical_devices" in crash["advice"]
    devices = r.found["run.devices"]["evidence"]["config_calls"]
    assert [c["api"] for c in devices] == ["tf.config.set_soft_device_placement"]


def test_sigkill_mid_run_keeps_what_was_seen_before(tmp_path: Path) -> None:
    r = run_program(tmp_path, PY, str(PROGRAMS / "killed_mid_run.py"))
    assert r.returncode == 137
    assert "was killed by SIGKILL" in r.found["run.command"]["message"]
    crash = r.found["run.crash"]
    assert crash["status"] == "fail" and "what the hooks recorded before survives" in \
        crash["message"]
    (obs,), _ = eventfiles.observe_all(r.run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME)
    assert not obs.exited
    assert [s.class_name for s in obs.strategies] == ["MirroredStrategy"]
    assert [c.api for c in obs.config_calls] == ["tf.config.set_logical_device_configuration"]
    (series,) = obs.series
    assert len(series.steps) >= 10 and series.steps[0].loss is not None
    assert obs.profile is not None and obs.profile.steps == [10, 11, 12, 13, 14]


def test_a_program_that_sets_tf_cpp_min_log_level_itself_keeps_it_and_is_still_observed(
        tmp_path: Path) -> None:
    """Its level decides what reaches the terminal (nothing of TensorFlow's C++ INFO at 3);
    gpudiag still captures the whole C++ log (issue 26, case 3)."""
    r = run_program(tmp_path, PY, str(PROGRAMS / "sets_log_level.py"))
    assert r.returncode == 0 and "sum 9.0" in r.stdout
    assert r.found["run.placement"]["status"] == "ok"
    assert "cpu_feature_guard.cc" not in r.stderr
    saved = (r.run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME / layout.RUN_STDERR)
    assert b"cpu_feature_guard.cc" in saved.read_bytes()


# ---------------------------------------------------------------- not Python, bad input


def test_a_non_python_command_gets_what_monitor_gives_and_its_exit_code(tmp_path: Path) -> None:
    r = run_program(tmp_path, "sh", "-c", "echo hi; exit 3")
    assert r.returncode == 3 and r.stdout == "hi\n" and r.stderr.startswith("gpudiag run")
    assert [f["id"] for f in r.report["findings"]] == [
        "run.command", "run.tensorflow", "run.terminal", "run.nvml", "run.every-gpu-used",
        "run.gpu-idle"]
    assert r.found["run.tensorflow"]["status"] == "skip"
    assert "not a Python program" in r.found["run.tensorflow"]["message"]


def test_a_launcher_gets_one_record_and_one_set_of_findings_per_tensorflow_process(
        tmp_path: Path) -> None:
    r = run_program(tmp_path, PY, str(PROGRAMS / "launcher_two_workers.py"))
    assert r.returncode == 0, r.stderr[-2000:]
    assert "worker 0 2.0" in r.stdout and "worker 1 3.0" in r.stdout
    processes = r.report["data"]["run"]["tensorflow_processes"]
    assert len(processes) == 2 and r.report["data"]["run"]["python_processes"] == 3
    assert "2 Python process(es)" not in r.found["run.tensorflow"]["message"]
    assert "3 Python process(es), 2 imported TensorFlow" in r.found["run.tensorflow"]["message"]
    for n in (1, 2):
        assert r.found[f"run.devices.p{n}"]["status"] == "warn"  # CPU only here
        # their shared stderr is told apart by the thread id of each log line: each worker
        # ran its own few eager ops (ones, reduce_sum) and nothing else
        placement = r.found[f"run.placement.p{n}"]
        assert placement["status"] == "ok", placement["message"]
        assert 0 < placement["evidence"]["eager_ops"] < 20, placement["evidence"]
    assert "run.devices" not in r.found
    assert "run.cluster" not in r.found  # no TF_CONFIG, no cluster
