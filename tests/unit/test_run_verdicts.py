"""`gpudiag run`'s verdicts with plain records (no TensorFlow, no processes)."""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import pytest

from gpudiag import catalogue
from gpudiag.layout.events import ConfigCall, Crash, DatasetCall, DeviceScope, Profile, PyWarning
from gpudiag.records.run import (
    DeviceSnapshot,
    FunctionGraph,
    ProcessObservation,
    Step,
    StepSeries,
    StrategyRecord,
    WeightsRecord,
)
from gpudiag.verdicts.run import crash as run_crash
from gpudiag.verdicts.run import memory_config, tflog
from gpudiag.verdicts.run import placement as run_placement
from gpudiag.verdicts.run import process as run_verdicts
from gpudiag.verdicts.run import progress as run_progress
from gpudiag.verdicts.run import throughput as run_throughput

GPUS = [f"/device:GPU:{i}" for i in range(4)]


def obs(**fields: object) -> ProcessObservation:
    base: dict[str, object] = {"pid": 10, "ppid": 1, "argv": ["train.py"], "start_env": {},
                               "tf_version": "2.21.0"}
    base.update(fields)
    return ProcessObservation(**base)  # type: ignore[arg-type]


def snapshot(logical: list[str]) -> DeviceSnapshot:
    return DeviceSnapshot("strategy", [], logical, [], True, True)


def mirrored(devices: list[str], nccl: bool = True) -> StrategyRecord:
    return StrategyRecord("MirroredStrategy", len(devices), devices, devices,
                          "NcclAllReduce" if nccl else "ReductionToOneDevice", None, nccl, None,
                          {"file": "/x/train.py", "line": 7, "function": "<module>"})


def test_canonical_device_names() -> None:
    assert run_verdicts.canonical("/gpu:1") == "/device:GPU:1"
    assert run_verdicts.canonical("/job:localhost/replica:0/task:0/device:CPU:2") == \
        "/device:CPU:2"
    assert run_verdicts.canonical("GPU:0") == "/device:GPU:0"
    assert run_verdicts.canonical("/job:worker/task:1") is None


def test_every_device_used_names_each_idle_gpu_and_what_the_strategy_used() -> None:
    o = obs(devices=snapshot(["/device:CPU:0", *GPUS]), strategies=[mirrored(GPUS[:1])])
    nvml = [{"index": i, "util_p95_percent": 93.0 if i == 0 else 0.0} for i in range(4)]
    f = run_placement.devices_used(o, {"/device:CPU:0": 40, "/device:GPU:0": 300},
                                  {"/device:GPU:0": 0.08}, nvml, 10.0)
    assert f.status == "fail"
    assert f.message.startswith("4 GPU(s) visible to TensorFlow; MirroredStrategy used 1: "
                                "/device:GPU:1, /device:GPU:2, /device:GPU:3")
    assert "NVML GPU 1 (p95 0 %)" in f.message and "did no work" in f.message
    assert f.evidence["idle"] == GPUS[1:] and f.evidence["nvml_idle"] == [1, 2, 3]


def test_every_device_used_on_virtual_cpus_checks_the_strategys_devices() -> None:
    devices = ["/device:CPU:1", "/device:CPU:2"]
    o = obs(devices=snapshot(["/device:CPU:0", *devices]), strategies=[mirrored(devices,
                                                                                 False)])
    ok = run_placement.devices_used(o, {"/device:CPU:1": 9, "/device:CPU:2": 9}, None, None, 10)
    assert ok.status == "warn" and "every device did work" in ok.message
    idle = run_placement.devices_used(o, {"/device:CPU:1": 9}, None, None, 10)
    assert idle.status == "fail" and "/device:CPU:2 did no work" in idle.message
    none = run_placement.devices_used(obs(), None, None, None, 10)
    assert none.status == "skip"


def test_soft_placement_compares_pinned_graph_nodes_with_the_placement_log() -> None:
    graph = FunctionGraph("train_step", "__inference_train_step_9", 10, [
        ("tower_0/MatMul", "MatMul", "/device:CPU:0"),
        ("tower_1/MatMul", "MatMul", "/gpu:1"),
        ("tower_1/Relu", "Relu", "/gpu:1"),
    ])
    o = obs(devices=snapshot(["/device:CPU:0"]), graphs=[graph])
    placed = {"__inference_train_step_9": {"tower_0/MatMul": "/device:CPU:0",
                                           "tower_1/MatMul": "/device:CPU:0",
                                           "tower_1/Relu": "/device:CPU:0"}}
    f = run_placement.soft_placement(o, placed)
    assert f.status == "fail"
    assert f.message.startswith("2 op(s) pinned to /device:GPU:1 (tower_1) ran on "
                                "/device:CPU:0: /device:GPU:1 does not exist here")
    assert f.evidence["compared_nodes"] == 3
    exists = obs(devices=snapshot(["/device:CPU:0", "/device:GPU:1"]), graphs=[graph])
    assert run_placement.soft_placement(exists, placed).status == "warn"  # no kernel there
    assert run_placement.soft_placement(o, {}).status == "skip"


def test_devices_fail_on_a_configuration_made_after_initialisation() -> None:
    call = ConfigCall(order=2, api="tf.config.experimental.set_memory_growth",
                      args=["/physical_device:GPU:0", True], initialized_before=True,
                      caller={"file": "/x/train.py", "line": 30, "function": "main"},
                      error_type="RuntimeError",
                      error="Physical devices cannot be modified after being initialized")
    f = run_verdicts.devices(obs(config_calls=[call], devices=snapshot(["/device:GPU:0"])))
    assert f.status == "fail"
    assert "at train.py:30 was called after the devices were initialised" in f.message
    assert f.advice == catalogue.by_id("configured-after-init").fix
    (action,) = f.actions  # the change, at the line that made the call
    assert action.where == "train.py:30" and "set_memory_growth right after importing" in \
        action.what
    assert f.title == "set_memory_growth raised RuntimeError: it did not take effect"


def series(losses: list[float], kind: str = "fit", classes: int | None = 10,
           accuracy: float | None = None) -> StepSeries:
    steps = [Step(i, 100.0 + i * 0.01, 0.01, loss,
                  {} if accuracy is None else {"accuracy": accuracy}, epoch=0)
             for i, loss in enumerate(losses)]
    return StepSeries(kind, "Model.fit" if kind == "fit" else "tf.function step", steps, 64,
                      classes, {"learning_rate": 0.0})


def test_learning_stuck_at_ln10_with_weights_that_never_moved_is_not_a_device_problem() -> None:
    flat = [math.log(10)] * 20
    frozen = WeightsRecord("Model.fit", [[1.0, 2.0, 3.0]], [[1.0, 2.0, 3.0]], "begin", "end", 20)
    f = run_progress.learning(obs(series=[series(flat, accuracy=0.1)], weights=[frozen]))
    assert f.status == "fail"
    assert "stuck at ln 10 = 2.3026 or above" in f.message and "not learning" in f.message
    assert "accuracy 0.100 (chance)" in f.message
    assert "this is not a device problem" in f.message and "learning rate is 0" in f.message


def test_learning_ok_when_the_loss_falls_and_ln_c_only_with_the_programs_class_count() -> None:
    falling = [2.3 - 0.1 * i for i in range(20)]
    moved = WeightsRecord("tf.function step", [[1.0]], [[1.5]], "after-first-call", "exit", 19)
    ok = run_progress.learning(obs(series=[series(falling, "function", None)], weights=[moved]))
    assert ok.status == "ok" and "the weights moved" in ok.message
    stuck = run_progress.learning(obs(series=[series([math.log(4)] * 8, "function", 4)]))
    assert stuck.status == "fail" and "stuck at ln 4" in stuck.message
    # no class count from the program: no ln k guessed (issue 19: "stuck at ln 86")
    unknown = run_progress.learning(obs(series=[series([math.log(4)] * 8, "function", None)]))
    assert unknown.status == "warn" and "stuck at ln" not in unknown.message
    assert "the number of classes is unknown" in unknown.message
    slow = [4.46 - 0.001 * i for i in range(30)]  # ln 86 = 4.454: a slow 10-class learner
    slow10 = run_progress.learning(obs(series=[series(slow, "function", 10)], weights=[moved]))
    assert "stuck at ln" not in slow10.message and slow10.status == "warn"
    assert run_progress.learning(obs(series=[series([1.0, 0.5])])).status == "skip"


def test_throughput_leaves_out_warmup_and_profiled_steps() -> None:
    s = series([1.0] * 30)
    f = run_throughput.throughput(obs(series=[s]), warmup=10)
    (row,) = f.evidence["loops"]
    assert row["timed_steps"] == 19  # steps 10..28 have a next step in the same epoch
    assert row["step_s_median"] == 0.01 or math.isclose(row["step_s_median"], 0.01)
    assert math.isclose(row["examples_per_s"], 6400.0, rel_tol=1e-6)


def test_a_custom_loops_step_time_is_the_start_to_start_period_not_the_call() -> None:
    # A tf.function called every 1.6 ms whose call takes 1.0 ms (next(iterator) and Python
    # between calls): the step is 1.6 ms, the call 63 % of it, examples/s from the period.
    steps = [Step(i, 100.0 + i * 0.0016, 0.001, None) for i in range(40)]
    loop = StepSeries("function", "tf.function step", steps, 32)
    profile = Profile(status="stopped", logdir="/r", source="tf.function step",
                      steps=[10, 11, 12, 13, 14])
    f = run_throughput.throughput(obs(series=[loop], profile=profile), warmup=10)
    (row,) = f.evidence["loops"]
    # the profiled steps and the one after them, and the last call (no next start)
    assert row["timed_steps"] == 40 - 10 - 5 - 1 - 1
    assert math.isclose(row["step_s_median"], 0.0016, rel_tol=1e-6)
    assert math.isclose(row["call_s_median"], 0.001) and round(row["call_share"], 3) == 0.625
    assert math.isclose(row["examples_per_s"], 32 / 0.0016, rel_tol=1e-6)
    assert "1.60 ms/step (start to start), the step call 1.00 ms (63 % of it)" in f.message
    # the loop's step is that median with its interval (identical periods: a point)
    assert math.isclose(row["step_s_low"], 0.0016, rel_tol=1e-6)
    assert math.isclose(row["step_s_high"], 0.0016, rel_tol=1e-6)
    assert "the median step's 95 % CI 1.60 ms-1.60 ms" in f.message, f.message
    jittered = [Step(i, 100.0 + i * 0.0016 + (i * 7 % 5) * 0.0001, 0.001, None)
                for i in range(40)]
    (row,) = run_throughput.throughput(obs(series=[replace(loop, steps=jittered)],
                                           profile=profile), warmup=10).evidence["loops"]
    assert row["step_s_low"] <= row["step_s_median"] <= row["step_s_high"]
    assert row["step_s_low"] < row["step_s_high"]


def test_tf_log_status_is_the_worst_known_message() -> None:
    lines = ["W gpu_device.cc:2256] Cannot dlopen some GPU libraries. Please make sure ...",
             "I port.cc:153] oneDNN custom operations are on."]
    f = tflog.tf_log(catalogue.match_lines(lines), None)
    assert f.status == "fail" and "gpu-libraries-missing" in f.message
    assert tflog.tf_log(catalogue.match_lines(lines[1:]), None).status == "ok"
    assert tflog.tf_log([], "the program set TF_CPP_MIN_LOG_LEVEL=3").status == "skip"


def test_crash_with_catalogue_fix_and_the_kill_case() -> None:
    crash = Crash(type="ValueError",
                  message="Invalid value passed for `per_example_loss`. Expected a tensor with "
                          "at least rank 1. Received per_example_loss=2.0 with rank 0",
                  thread="MainThread", user_frame={"file": "/x/train.py", "line": 41,
                                                   "function": "train_step", "code": "loss = ..."})
    f = run_crash.crash([obs(crash=crash)], 1)
    assert f.status == "fail" and "in train_step() at train.py:41" in f.message
    assert "Reduction.NONE" in f.advice
    killed = run_crash.crash([obs(series=[series([1.0] * 12)])], -9)
    assert killed.status == "fail" and "Model.fit: 12 steps" in killed.message
    assert run_crash.crash([obs()], 0).status == "ok"


def test_a_crash_of_unknown_shapes_names_the_map_that_lost_them() -> None:
    """The hooks record each map's output shapes where it lost its input's (a map through
    tf.numpy_function); run.crash names that map's line and puts the fix there, not at
    fit's line where it raised. Another crash, or none lost, stays as it was."""
    here = {"file": "/x/train.py", "line": 30, "function": "<module>",
            "code": "model.fit(train_ds, epochs=2)"}
    crash = Crash(type="ValueError", message="as_list() is not defined on an unknown TensorShape.",
                  thread="MainThread", user_frame=here)
    source = DatasetCall("from_tensor_slices", {}, None, None, 1,
                         {"file": "/x/train.py", "line": 20, "function": "<module>"})
    numpy_fn = DatasetCall("numpy_function", {}, {"name": "noise", "file": "/x/train.py",
                                                  "line": 5}, None, None,
                           {"file": "/x/train.py", "line": 21, "function": "<module>"})
    mapped = DatasetCall("map", {}, {"name": "tf_noise", "file": "/x/train.py", "line": 9},
                         1, 2, {"file": "/x/train.py", "line": 21, "function": "<module>",
                                "code": "ds = ds.map(tf_noise)"}, "(<unknown>, ())")
    batched = DatasetCall("batch", {"batch_size": 32}, None, 2, 3,
                          {"file": "/x/train.py", "line": 22, "function": "<module>"})
    calls = [source, numpy_fn, mapped, batched]
    f = run_crash.crash([obs(crash=crash, dataset_calls=calls)], 1)
    assert f.evidence["catalogue"] == "data-unknown-rank"
    assert "at train.py:30 (`model.fit(train_ds, epochs=2)`)" in f.message
    assert "the shapes were lost at train.py:21 (`ds = ds.map(tf_noise)`): Dataset.map of " \
        "tf_noise through tf.numpy_function(noise) makes elements of shapes " \
        "(<unknown>, ())" in f.message
    assert f.advice.startswith("At train.py:21: Give each output of the map its shape")
    assert "set_shape" in f.advice and "ensure_shape" in f.advice
    assert f.evidence["shape_lost_at"]["line"] == 21
    unseen = run_crash.crash([obs(crash=crash, dataset_calls=[source, batched])], 1)
    assert "lost at" not in unseen.message and unseen.advice.startswith("Give each output")
    other = Crash(type="ValueError", message="Expected workers to be positive. Received is -1.",
                  thread="MainThread", user_frame=here)
    g = run_crash.crash([obs(crash=other, dataset_calls=calls)], 1)
    assert g.evidence["catalogue"] == "tf-keras-fit-not-positive" and "lost at" not in g.message


def test_session_config_against_tf_config_calls() -> None:
    call = ConfigCall(order=1, api="tf.config.experimental.set_memory_growth",
                      initialized_before=False)
    soft = ConfigCall(order=2, api="tf.config.set_soft_device_placement", args=["True"],
                      initialized_before=False)
    o = obs(sessions=[{"allow_soft_placement": False, "allow_growth": True}],
            config_calls=[call, soft], devices=snapshot(["/device:CPU:0"]))
    f = memory_config.session_config(o)
    assert f is not None and f.status == "warn"
    assert "both configure GPU memory" in f.message
    assert "the Session follows its ConfigProto" in f.message
    assert memory_config.session_config(obs()) is None


def test_a_configproto_s_soft_placement_is_no_conflict_when_the_program_set_none() -> None:
    """A TF1 worker passing ConfigProto(allow_soft_placement=True) (Hands-On ML's way) with
    eager execution disabled: tf.config holds TensorFlow's default (False), which the
    program never set: no disagreement to warn about (it was a warn on every worker)."""
    off = DeviceSnapshot("session", [], ["/device:CPU:0"], [], False, True)
    o = obs(sessions=[{"allow_soft_placement": True}], devices=off)
    f = memory_config.session_config(o)
    assert f is not None and f.status == "ok", f.message
    assert "allow_soft_placement=True" in f.message
    soft = ConfigCall(order=1, api="tf.config.set_soft_device_placement", args=["False"],
                      initialized_before=False)
    f = memory_config.session_config(obs(sessions=[{"allow_soft_placement": True}],
                                        devices=off, config_calls=[soft]))
    assert f is not None and f.status == "warn" and "the Session follows its ConfigProto" in \
        f.message


def test_crash_cause_on_a_later_line_of_the_message_or_in_tensorflows_log() -> None:
    message = ("Graph execution error:\n\nDetected at node cond/Placeholder_1 defined at (most "
               "recent call last):\n2 root error(s) found.\n  (0) INVALID_ARGUMENT:  You must "
               "feed a value for placeholder tensor 'cond/else/_1/cond/Placeholder_1' with "
               "dtype int32\n\t [[{{node cond/Placeholder_1}}]]")
    crash = Crash(type="InvalidArgumentError", message=message, thread="MainThread")
    f = run_crash.crash([obs(crash=crash)], 1)
    assert f.evidence["catalogue"] == "lazy-variables-in-replica"
    assert "You must feed a value for placeholder tensor" in f.message
    assert "Graph execution error" not in f.message
    assert "strategy.scope()" in f.advice and "tf_keras" in f.advice
    # the exception says only its first line: the cause is in TensorFlow's log around it
    short = Crash(type="InvalidArgumentError", message="Graph execution error:",
                  thread="MainThread")
    log = ["W0000 00:00:1795520196.888933    9561 local_rendezvous.cc:412] Local rendezvous "
           "is aborting with status: INVALID_ARGUMENT: You must feed a value for placeholder "
           "tensor 'replica_1/dense/kernel/Initializer/x' with dtype float"]
    g = run_crash.crash([obs(crash=short)], 1, log_lines=log)
    assert g.evidence["catalogue"] == "lazy-variables-in-replica"
    assert g.evidence["matched_in"] == "log" and "replica_1/dense/kernel" in g.message
    unknown = run_crash.crash([obs(crash=Crash(type="KeyError", message="'x'\nmore",
                                               thread="MainThread"))], 1)
    assert unknown.evidence["catalogue"] is None and "'x'" in unknown.message


def test_learning_names_probabilities_taken_for_logits_and_what_keras_warned() -> None:
    floor = math.log(1 + 9 / math.e)  # 1.4612: the least loss of softmax outputs as logits
    settled = [2.3 - 0.05 * i for i in range(17)] + [floor + 0.001] * 20
    moved = WeightsRecord("tf.function step", [[1.0]], [[1.5]], "after-first-call", "exit", 36)
    f = run_progress.learning(obs(series=[series(settled, "function", 10)], weights=[moved]))
    assert f.status == "fail" and "settled at 1.4612 = ln(1 + 9/e)" in f.message
    assert "drop the last softmax" in f.advice
    # the same losses, the class count unknown: no floor claimed
    assert "settled at" not in run_progress.learning(
        obs(series=[series(settled, "function", None)], weights=[moved])).message
    # a loss that went below it on its way down is not stuck there
    through = [2.3 - 0.05 * i for i in range(40)]
    assert "settled at" not in run_progress.learning(
        obs(series=[series(through, "function", 10)], weights=[moved])).message
    # Keras fit's running mean still falling, its last value by chance at the floor (a
    # MirroredStrategy tutorial's 24 steps): not settled
    falling_to = [2.286, 2.412, 2.377, 2.354, 2.32, 2.3, 2.274, 2.255, 2.049, 2.052, 2.036,
                  1.996, 1.97, 1.949, 1.924, 1.901, 1.645, 1.613, 1.607, 1.599, 1.574, 1.537,
                  1.523, 1.484]
    passing = run_progress.learning(obs(series=[series(falling_to, "fit", 10)], weights=[moved]))
    assert passing.status == "ok" and "settled at" not in passing.message
    # creeping down onto it, its last quarter within 5 % (a slower run of the quickstart
    # with softmax twice): settled
    creeping = [2.3, 2.1, 1.9, 1.75, 1.62, 1.55, 1.52, 1.50, 1.49, 1.48, 1.475, floor + 0.02]
    crept = run_progress.learning(obs(series=[series(creeping, "function", 10)], weights=[moved]))
    assert crept.status == "fail" and "settled at 1.4612" in crept.message
    warning = PyWarning("UserWarning", '"`sparse_categorical_crossentropy` received '
                        "`from_logits=True`, but the `output` argument was produced by a "
                        "Softmax activation and thus does not represent logits. Was this "
                        'intended?"', "/site-packages/keras/src/backend/tensorflow/nn.py", 1402,
                        {"file": "/x/train.py", "line": 21, "function": "<module>"})
    falling = [2.3 - 0.05 * i for i in range(40)]
    w = run_progress.learning(obs(series=[series(falling, "fit", 10)], weights=[moved],
                                  py_warnings=[warning]))
    assert w.status == "warn" and "Keras warned: UserWarning: `sparse_categorical_crossentropy` " \
        "received `from_logits=True`" in w.message and "(after train.py:21)" in w.message
    assert w.advice.startswith("Say it once") and w.evidence["warnings"][0]["id"] == \
        "from-logits-on-softmax"


def test_eager_scopes_on_missing_devices_and_created_devices_left_idle() -> None:
    scope = DeviceScope("/device:GPU:2", {"file": "/x/guide.py", "line": 17,
                                          "function": "<module>"})
    here = DeviceScope("/CPU:0", {"file": "/x/guide.py", "line": 30, "function": "<module>"})
    o = obs(devices=snapshot(["/device:CPU:0"]), device_scopes=[scope, here])
    f = run_placement.soft_placement(o, {}, eager_by_device={"/device:CPU:0": 3})
    assert f.status == "fail" and "tf.device('/device:GPU:2') at guide.py:17" in f.message
    assert "/device:CPU:0 (3)" in f.message and len(f.evidence["eager_pins_missing"]) == 1
    off = DeviceSnapshot("exit", [], ["/device:CPU:0"], [], False, True)  # it raised instead
    assert run_placement.soft_placement(obs(devices=off, device_scopes=[scope]), {}).status \
        == "skip"
    split = ConfigCall(order=1, api="tf.config.set_logical_device_configuration",
                       args=["/physical_device:CPU:0", [{}, {}, {}]], initialized_before=False)
    three = obs(devices=snapshot(["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]),
                config_calls=[split], strategies=[mirrored(["/device:CPU:0", "/device:CPU:1"])])
    used = run_placement.devices_used(three, {"/device:CPU:0": 9, "/device:CPU:1": 7}, None,
                                     None, 5.0)
    assert used.status == "warn" and used.evidence["idle"] == ["/device:CPU:2"]
    assert "/device:CPU:2, created by the program" in used.message
    late = ConfigCall(order=1, api="tf.config.set_logical_device_configuration",
                      args=["/physical_device:CPU:0", [{}, {}]], initialized_before=True,
                      error_type="RuntimeError",
                      error="Virtual devices cannot be modified after being initialized")
    memory = memory_config.memory(obs(config_calls=[late], devices=snapshot(["/device:CPU:0"])),
                                 None)
    assert memory.status == "skip" and "did not take effect" not in memory.message


def test_a_fit_whose_batches_were_not_seen_is_judged_from_its_epochs_losses() -> None:
    """tf_keras under ParameterServerStrategy: only fit's epochs are recorded."""
    fit = StepSeries("fit", "Model.fit", [], facts={
        "strategy": "ParameterServerStrategyV2", "params": {"epochs": 5, "steps": 20}},
        epochs=[{"loss": v} for v in (0.72, 0.53, 0.49, 0.38, 0.32)])
    f = run_progress.learning(obs(series=[fit]))
    assert f.status == "ok", f.message
    assert "loss 0.7200 -> 0.3200 over 5 epochs" in f.message and "100 steps" in f.message
    assert f.evidence["loops"][0]["judged_from"] == "epochs"
    flat = replace(fit, epochs=[{"loss": 0.5}] * 5)
    assert run_progress.learning(obs(series=[flat])).status == "warn"
    two = replace(fit, epochs=fit.epochs[:2])
    assert run_progress.learning(obs(series=[two])).status == "skip"
    why = run_throughput.unseen_fit_batches(obs(series=[fit]))
    assert why is not None and "Model.fit ran 5 epoch(s) (100 steps)" in why
    assert run_throughput.unseen_fit_batches(obs(series=[replace(fit, facts={})])) is None


def test_fits_of_one_model_are_one_training_run_for_the_learning_verdict() -> None:
    """A notebook fitting one epoch a call: each short fit alone compares its first
    batch's loss with its epoch's running mean (these three fits, from a real run of
    tests/programs/fit_per_epoch.py, read as "stuck at ln 4" in the first); together the
    model learns. Fits of different models stay apart."""
    def fit(n: int, model: int, losses: list[float]) -> StepSeries:
        steps = [Step(i, 100.0 + i, 0.01, v, epoch=0) for i, v in enumerate(losses)]
        return StepSeries("fit", f"Model.fit #{n}", steps, 8, 4,
                          {"model_id": model, "learning_rate": 0.001},
                          [{"loss": losses[-1]}])

    def ramp(first: float, last: float) -> list[float]:
        return [first + (last - first) * i / 31 for i in range(32)]

    calls = [fit(1, 7, ramp(1.2781, 1.3891)), fit(2, 7, ramp(1.1654, 1.2441)),
             fit(3, 7, ramp(1.5429, 1.1219))]
    moved = WeightsRecord("Model.fit", [[1.0]], [[1.5]], "begin", "end", 96)
    together = run_progress.learning(obs(series=calls, weights=[moved]))
    assert together.status == "ok", together.message
    assert together.message.startswith("Model.fit #1 to #3 (one model fitted 3 times): loss "
                                       "1.2781 -> 1.1219 over 96 steps")
    (loop,) = together.evidence["loops"]
    assert loop["stuck_at_ln_classes"] is None
    apart = run_progress.learning(obs(series=[replace(c, facts={"model_id": n})
                                              for n, c in enumerate(calls)], weights=[moved]))
    # apart, the first fit's batches rise (their running means 1.2781 -> 1.3891)
    assert apart.status == "warn" and "Model.fit #1: loss 1.2781 -> 1.3891" in apart.message
    assert "Model.fit #1: loss 1.2781 -> 1.3891 over 32 steps, not falling" in apart.message


def test_a_first_batch_that_happens_to_sit_at_ln_classes_does_not_make_a_learning_model_stuck(
        ) -> None:
    """CI's run of tests/programs/fit_per_epoch.py: the first batch of 8 examples had loss
    1.3884 (ln 4 = 1.3863), the running means after it stood near 1.6 and the third fit ended
    at 1.35. Against the first batch alone that read "stuck at ln 4" (a FAIL); against where
    the loss started (its first steps' mean) it fell."""
    losses = [1.3884] + [1.62 - 0.27 * i / 94 for i in range(95)]
    steps = [Step(i, 100.0 + i, 0.01, v, epoch=0) for i, v in enumerate(losses)]
    fit = StepSeries("fit", "Model.fit", steps, 8, 4, {"learning_rate": 0.001},
                     [{"loss": losses[-1]}])
    moved = WeightsRecord("Model.fit", [[1.0]], [[1.5]], "begin", "end", 96)
    f = run_progress.learning(obs(series=[fit], weights=[moved]))
    assert f.status == "ok", f.message
    (loop,) = f.evidence["loops"]
    assert loop["first_loss"] == 1.3884 and loop["start_loss"] > 1.55
    # a loss that never left ln 4 is still stuck there, however its first batch read
    flat = replace(fit, steps=[replace(st, loss=math.log(4) * (1.01 if st.index == 0 else 1))
                               for st in steps], epochs=[{"loss": math.log(4)}])
    stuck = run_progress.learning(obs(series=[flat], weights=[moved]))
    assert stuck.status == "fail" and "stuck at ln 4" in stuck.message


# ------------------------------------------------- the input share of the whole run
def _waiting_loop(shares: list[float], period: float = 0.01) -> Any:
    from gpudiag.records.run import Step, StepSeries

    steps, t = [], 1000.0
    for i, share in enumerate(shares):
        steps.append(Step(i, t, period * (1 - share), None,
                          wait_s=None if i == 0 else period * shares[i - 1]))
        t += period
    return StepSeries("function", "tf.function train_step", steps)


def test_the_input_share_is_read_from_every_timed_step_with_its_spread() -> None:
    from gpudiag.verdicts.run.throughput import input_series

    w = input_series(_waiting_loop([0.30] * 200), warmup=10)
    assert w is not None and w["share"] == pytest.approx(0.30)
    assert w["low"] == pytest.approx(0.30) and w["high"] == pytest.approx(0.30)
    assert w["steps"] == 189  # after the warm-up, each step with the wait before it


def test_a_share_whose_spread_holds_the_threshold_says_so_and_one_clear_of_it_decides() -> None:
    """xprof's 20 %: a loop that waits 30 % is input-bound whatever the window saw; one
    whose blocks straddle 20 % is named near the threshold, never flipped to ok."""
    from gpudiag.readers.steprecords import StepParts
    from gpudiag.verdicts.input_causes import input_share
    from gpudiag.verdicts.run.throughput import input_series
    from gpudiag.verdicts.step_causes import ProgramFacts

    window = StepParts("mean", 0.01, 0.001, 0.0, 0.001, 0.008, 0.0, 0.0, 0.0)  # 10 % input
    clear = input_series(_waiting_loop([0.30] * 200), warmup=10)
    share, source, near = input_share(ProgramFacts(input_series=clear), window)
    assert share == pytest.approx(0.30) and not near and "the profiled window: 10 %" in source
    mixed = input_series(_waiting_loop(([0.12] * 10 + [0.28] * 10) * 10), warmup=0)
    assert mixed is not None and mixed["low"] < 0.20 <= mixed["high"]
    assert input_share(ProgramFacts(input_series=mixed), window)[2]
    assert input_share(ProgramFacts(), window) == (pytest.approx(0.10), "", False)


# ------------------------------- the same program, the same verdict (issue 37)
def _random_label_fits() -> list[StepSeries]:
    """Six real runs of tests/programs/keras_random_labels.py (tests/data/learning)."""
    import json

    from helpers import TESTS_DIR
    doc = json.loads((TESTS_DIR / "data" / "learning" / "random_labels.json").read_text())
    return [StepSeries("fit", "Model.fit", [
        Step(i, 100.0 + i * 0.01, 0.001, loss, {"accuracy": acc}, epoch=epoch)
        for i, epoch, loss, acc in r["steps"]], r["batch_size"], r["num_classes"],
        {"learning_rate": 0.001}, r["epochs"]) for r in doc["runs"]]


def test_a_random_label_program_is_not_learning_in_every_run_whichever_its_first_losses(
        ) -> None:
    """Its first losses (2.37 to 2.64 in these runs) once decided between "stuck at ln 10"
    (FAIL) and "accuracy at chance" (WARN): now the loss's level with its interval against
    ln 10, and the accuracy with its interval against chance, decide together."""
    moved = WeightsRecord("Model.fit", [[1.0]], [[1.5]], "begin", "end", 96)
    fits = _random_label_fits()
    assert len(fits) == 6
    for fit in fits:
        for scale in (0.9, 1.0, 1.2):  # the same run, its first 10 batches' losses other
            steps, total = [], 0.0
            for k, st in enumerate(fit.steps[:32]):  # epoch 1's running means
                batch = (k + 1) * (st.loss or 0) - k * ((fit.steps[k - 1].loss or 0) if k else 0)
                total += batch * (scale if k < 10 else 1)
                steps.append(replace(st, loss=total / (k + 1)))
            steps += fit.steps[32:]
            f = run_progress.learning(obs(series=[replace(fit, steps=steps)],
                                          weights=[moved]))
            (loop,) = f.evidence["loops"]
            assert f.status == "fail" and loop["cause"] == "not-learning", f.message
            assert "stuck at ln 10 = 2.3026 or above" in f.message
            assert "24 last batch losses" in f.message and "(chance)" in f.message
            assert loop["loss_against_ln_classes"]["side"] == "above"
            assert loop["accuracy_against_chance"]["side"] == "below"
            assert "near the threshold" not in f.message


def test_a_loss_whose_interval_crosses_its_threshold_is_a_warn_saying_so() -> None:
    """A custom loop's raw losses alternating about ln 10 less 2 % (2.2565): whichever
    side its last value or its median falls on, one status, the numbers said."""
    moved = WeightsRecord("tf.function step", [[1.0]], [[1.5]], "after-first-call", "exit", 40)
    for low, high in ((2.20, 2.30), (2.21, 2.31), (2.22, 2.29)):
        losses = [3.0] * 10 + [low if i % 2 else high for i in range(30)]
        f = run_progress.learning(obs(series=[series(losses, "function", 10)],
                                      weights=[moved]))
        (loop,) = f.evidence["loops"]
        assert f.status == "warn" and loop["cause"] == "near-threshold", f.message
        assert "the loss against ln 10 less 2%: near the threshold: " in f.message
        assert "threshold 2.2565" in f.message
    # clearly below: learning; clearly at ln 10 with no accuracy: stuck
    below = run_progress.learning(obs(series=[series([3.0] * 10 + [1.5, 1.6] * 15,
                                                     "function", 10)], weights=[moved]))
    assert below.status == "ok", below.message
    at = run_progress.learning(obs(series=[series([3.0] * 10 + [2.29, 2.31] * 15,
                                                  "function", 10)], weights=[moved]))
    assert at.status == "fail" and "stuck at ln 10 = 2.3026" in at.message


def test_accuracy_near_chance_is_said_with_its_interval_over_the_examples() -> None:
    """Loss clearly below ln 10, a last epoch's accuracy of 0.19 over 1280 examples
    (chance for 10 classes: 0.1, at most 0.19 counted as chance): near, a warn."""
    moved = WeightsRecord("Model.fit", [[1.0]], [[1.5]], "begin", "end", 20)
    fit = series([1.2] * 20, "fit", 10, accuracy=0.19)
    f = run_progress.learning(obs(series=[replace(fit, facts={})], weights=[moved]))
    assert f.status == "warn" and "the accuracy against chance: near the threshold: 0.190 (" \
        in f.message and "95 % CI over 1280 examples), threshold 0.190" in f.message
    clear = run_progress.learning(obs(series=[series([1.2 - 0.02 * i for i in range(20)],
                                                     "fit", 10, accuracy=0.6)],
                                      weights=[moved]))
    assert clear.status == "ok", clear.message


def test_a_loss_far_above_ln_classes_with_chance_accuracy_is_not_learning_said_so() -> None:
    """tests/programs/callback_predict.py once read its logits as probabilities: loss 9.59
    -> 9.49, accuracy 0.136 over 2048 examples (10 classes): the same cause and status as
    a loss at ln 10, its words saying where the level lies."""
    fit = series([9.5 + 0.01 * (i % 3) for i in range(64)], "fit", 10, accuracy=0.136)
    f = run_progress.learning(obs(series=[replace(fit, facts={})]))
    (loop,) = f.evidence["loops"]
    assert f.status == "fail" and loop["cause"] == "not-learning", f.message
    assert "far above ln 10 = 2.3026, worse than uniform predictions" in f.message


def _timed_loop(rows: list[tuple[float, float]], floor_s: float | None = None) -> Any:
    """A tf.function loop of (period, wait) rows, in seconds, with next()'s measured cost
    on a full buffer when given (the agent's input_floor event)."""
    from gpudiag.records.run import Step, StepSeries

    steps, t = [Step(0, 1000.0, 0.001, None)], 1000.0
    for i, (period, wait) in enumerate(rows, 1):
        t += period
        steps.append(Step(i, t, 0.001, None, wait_s=wait))
    facts = {} if floor_s is None else {"next_floor": {"floor_s": floor_s, "p10_s": floor_s,
                                                       "calls": 30}}
    return StepSeries("function", "tf.function train_step", steps, facts=facts)


def test_the_share_and_its_spread_are_one_statistic() -> None:
    """The keras-io XLA loop under gpudiag said 7 % over the whole run and 27-30 % over
    blocks: a ratio of sums beside a median of blocks. Both are now the ratio of the sums
    (the program's own clock's: a median of blocks said 70 % where the guide's parallel
    map, its waits in bursts, measured 36 %), the spread that ratio's interval over
    resampled blocks, so the share is always inside its spread."""
    from gpudiag.verdicts.run.throughput import input_series

    bursty = [(0.001, 0.0008)] * 10 + [(0.004, 0.0001)] * 10
    b = input_series(_timed_loop(bursty * 12), warmup=0)
    assert b is not None and b["share"] == pytest.approx(0.009 / 0.05)
    assert b["low"] < b["share"] < b["high"]
    # one long period (an epoch's end) weighs in both alike
    rows = [(0.0014, 0.0005)] * 120 + [(2.036, 0.0005)] + [(0.0014, 0.0005)] * 120
    w = input_series(_timed_loop(rows), warmup=0)
    assert w is not None and w["share"] == pytest.approx(0.0005 * 241 / (0.0014 * 240 + 2.036))
    assert w["low"] <= w["share"] <= w["high"]
    few = input_series(_timed_loop(rows[:30]), warmup=0)  # 3 blocks: no interval
    assert few is not None and few["low"] is None
    assert few["share"] == pytest.approx(0.5 / 1.4)


def test_next_calls_own_cost_on_a_full_buffer_is_not_input_to_prefetch() -> None:
    """next() takes 0.42 ms a call where it costs 0.27 ms with its batch ready (measured by
    the agent): 30 % of the step is in next(), 11 % of it waits for a batch. Not
    input-bound, no prefetch advised; a loop whose next() waits 5 ms of 10 is still
    input-bound with the floor taken off."""
    from gpudiag.verdicts import bottleneck as bn
    from gpudiag.verdicts.run.throughput import input_series

    ready = input_series(_timed_loop([(0.00142, 0.00042)] * 200, floor_s=0.00027), warmup=0)
    assert ready is not None and ready["share"] == pytest.approx(0.42 / 1.42)
    assert ready["hidden"]["share"] == pytest.approx(0.15 / 1.42)
    pipeline = [DatasetCall("from_tensor_slices", {}, None, None, 1,
                            {"file": "/u/loop.py", "line": 10, "direct": True}),
                DatasetCall("batch", {"batch_size": 64}, None, 1, 2,
                            {"file": "/u/loop.py", "line": 11, "direct": True})]
    window = _breakdown(1.42, compute=0.9, input_=0.42, host=0.1)
    f = bn.bottleneck(window, None, bn.ProgramFacts(calls=pipeline, input_series=ready,
                                                    loop="tf.function train_step"))
    assert "input-bound" not in f.evidence["causes"] and "prefetch" not in f.advice
    assert "not input-bound (11 % waits for input" in f.message
    assert "next()'s own 0.270 ms a call on a full buffer (measured)" in f.message
    assert "run several steps in each call of tf.function train_step" in f.advice
    # 0.2 ms measured: 14 % next()'s own, 15 % beyond it (under 20 %): fewer calls, still
    # no prefetch (on 2 busy cores it hid nothing: tests/e2e/test_input_advice_e2e.py)
    some = input_series(_timed_loop([(0.00142, 0.00042)] * 200, floor_s=0.0002), warmup=0)
    h = bn.bottleneck(window, None, bn.ProgramFacts(calls=pipeline, input_series=some,
                                                    loop="tf.function train_step"))
    assert "not input-bound (15 % waits for input" in h.message and "prefetch" not in h.advice
    slow = input_series(_timed_loop([(0.010, 0.005)] * 200, floor_s=0.00027), warmup=0)
    g = bn.bottleneck(_breakdown(10, compute=4.5, input_=5, host=0.5), None,
                      bn.ProgramFacts(calls=pipeline, input_series=slow))
    assert g.evidence["causes"] == ["input-bound"] and ".prefetch(tf.data.AUTOTUNE)" in g.advice
    assert slow is not None and slow["hidden"]["share"] == pytest.approx(0.473)


def _breakdown(period: float, *, compute: float, input_: float, host: float,
               between: float = 0.0) -> Any:
    from gpudiag.readers.steprecords import Breakdown, DeviceBreakdown, StepParts

    parts = StepParts("0", *(x / 1e3 for x in (period, compute, 0, input_, host, 0, between)))
    return Breakdown("t.xplane.pb", "host step markers", ["0", "1"],
                     [DeviceBreakdown("/device:CPU:0", "placement", [parts, parts], 100)],
                     [], None)


def _fit_with(py_input: list[dict[str, Any]], period: float = 0.004) -> Any:
    from gpudiag.records.run import ProcessObservation, Step, StepSeries

    steps = [Step(i, 1000.0 + i * period, period * 0.99, None, epoch=0) for i in range(100)]
    fit = StepSeries("fit", "Model.fit", steps, facts={"py_input": py_input})
    return ProcessObservation(pid=1, ppid=None, argv=[], start_env={}, series=[fit]), fit


def test_a_python_data_class_is_input_with_the_fix_that_fits_it() -> None:
    """A PyDataset's __getitem__ at 3 ms a batch in a 4 ms step is input-bound with
    tf.data ops advised; its thread workers are said to share the GIL; a generator is
    named as one; 0.4 ms a batch (10 %) is no cause."""
    from gpudiag.verdicts.run import hostcauses

    one = {"source": "PyDataset", "class": "Images", "workers": 1,
           "use_multiprocessing": False, "max_queue_size": 10, "batches": 100,
           "total_s": 0.3, "median_s": 0.003, "p90_s": 0.0035}
    obs, fit = _fit_with([one])
    (c,) = hostcauses.py_input_causes(hostcauses.py_input_facts(obs, fit, warmup=10))
    assert c.name == "input-bound" and c.share == pytest.approx(0.75)
    assert "from the keras.utils.PyDataset Images (its __getitem__, on tf.data's thread) " \
        "in 3.00 ms (median of 100 batches, 0.30 s of the fit's 0.40 s): 75 % of the " \
        "4.00 ms step" in c.text
    assert c.advice.startswith("tf.data ops instead of Python per batch")
    assert "workers" not in c.advice and c.evidence["predicted"]["step_s"] is None
    # 4 thread workers: their queue is full (0.1 ms to take a batch), but their
    # __getitem__ costs 1.2 ms of CPU a batch, Python holding the GIL beside the step
    threads = {**one, "workers": 4, "median_s": 0.0001, "cpu_median_s": 0.0012,
               "cpu_where": "workers"}
    obs, fit = _fit_with([threads])
    (t,) = hostcauses.py_input_causes(hostcauses.py_input_facts(obs, fit, warmup=10))
    assert t.share == pytest.approx(0.30)
    assert "whose 4 thread workers spend 1.20 ms of CPU in __getitem__ a batch (median of " \
        "100 batches; taking one from their queue 0.100 ms)" in t.text
    assert "its 4 workers are threads" in t.advice and "time workers=1" in t.advice
    untimed = {**one, "workers": 4, "use_multiprocessing": True, "median_s": 0.002}
    obs, fit = _fit_with([untimed])
    (u,) = hostcauses.py_input_causes(hostcauses.py_input_facts(obs, fit, warmup=10))
    assert "the wait on its 4 worker processes' queue" in u.text
    assert "worker processes do not keep up" in u.advice
    gen = {**one, "source": "generator", "class": "batches", "workers": None}
    obs, fit = _fit_with([gen])
    (g,) = hostcauses.py_input_causes(hostcauses.py_input_facts(obs, fit, warmup=10))
    assert "from the Python generator batches" in g.text and "GIL" in g.advice
    from gpudiag.verdicts.run.throughput import throughput

    obs, fit = _fit_with([one])
    assert "75 % of it taking a batch from the PyDataset Images (3.00 ms, median of 100 " \
        "batches)" in throughput(obs, warmup=10).message
    small = {**one, "median_s": 0.0004}
    obs, fit = _fit_with([small])
    assert hostcauses.py_input_causes(hostcauses.py_input_facts(obs, fit, warmup=10)) == []


def test_a_fits_learning_record_says_its_losses_are_epoch_running_means_and_where_epochs_begin(
        ) -> None:
    """Keras hands its callbacks the running mean of the epoch so far: the record says so
    and where each epoch after the first began (the tab and the notebook mark them); a
    custom loop's losses are its steps' own."""
    losses = [2.3, 2.0, 1.8, 1.2, 1.1, 1.0, 0.7, 0.65, 0.6]
    fit = series(losses)
    fit = replace(fit, steps=[replace(st, epoch=st.index // 3) for st in fit.steps])
    moved = WeightsRecord("Model.fit", [[1.0]], [[1.5]], "begin", "end", 9)
    (row,) = run_progress.learning(obs(series=[fit], weights=[moved])).evidence["loops"]
    assert row["running_mean"] is True and row["epoch_starts"] == [3, 6]
    (row,) = run_progress.learning(obs(series=[series(losses, "function")],
                                       weights=[moved])).evidence["loops"]
    assert row["running_mean"] is False and row["epoch_starts"] == []
