"""A finding's actions (gpudiag.report.Action): what to change, at the program's line the
record knows, with the what-if prediction of the step after it; plain data as
tests/unit/test_verdicts_bottleneck.py builds it."""

from __future__ import annotations

import pytest
from test_verdicts_bottleneck import PIPELINE, breakdown, call

from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Prediction
from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts import whatif
from gpudiag.verdicts.run import crash as run_crash
from gpudiag.verdicts.step_causes import Cause


def test_input_bound_acts_at_the_map_and_the_pipelines_end_with_the_prediction() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                      bn.ProgramFacts(calls=PIPELINE, loop="Model.fit", epochs=3))
    assert [(a.what, a.where) for a in f.actions] == [
        ("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map", "train.py:11"),
        ("end the pipeline with .prefetch(tf.data.AUTOTUNE)", "train.py:12"),
        ("call .cache() after the map", "train.py:11")]
    first = f.actions[0].predicted
    pred = f.evidence["predicted"]
    assert first is not None and first.step_s == pytest.approx(pred["step_s"])
    assert first.step_s < 0.010 and pred["fix"] in first.basis
    assert all(a.predicted is None for a in f.actions[1:])  # one prediction, for the fixes


def test_host_bound_acts_at_the_loops_call_and_an_eager_step_at_its_def() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 2, 0.4, 0, 0.1, 1.5, 0, 1.2)), None,
                      bn.ProgramFacts(loop="tf.function train_step",
                                      called_at={"file": "/u/loop.py", "line": 44}))
    (a,) = f.actions
    assert a.where == "loop.py:44" and "train_step" in a.what
    assert a.predicted is not None and a.predicted.step_s == pytest.approx(0.0008)
    eager = {"at": {"file": "/u/e.py", "line": 20, "code": "tape.gradient"}, "def_line": 12}
    split = {"period_s": 0.01, "op_s": 0.002, "input_s": 0.0, "dispatch_s": 0.008,
             "steps": 5, "ops_per_step": 40}
    g = bn.eager(split, bn.ProgramFacts(loop="eager step train", eager=eager))
    (b,) = g.actions
    assert b.where == "e.py:12" and "tf.function" in b.what
    assert b.predicted is not None and b.predicted.step_s is None and b.predicted.basis


def test_a_cause_without_a_line_acts_without_one_and_a_calm_step_has_no_prediction() -> None:
    gpu = bn.bottleneck(breakdown(("/device:GPU:0", 10, 2, 0, 0.5, 0.5, 7, 0),
                                  source="device-plane"), None, bn.ProgramFacts())
    assert gpu.status == "ok" and gpu.actions == ()
    tuned = [call("from_tensor_slices", 10, 1), call("map", 11, 2, 1, num_parallel_calls=-1),
             call("prefetch", 12, 3, 2)]
    calm = bn.bottleneck(breakdown(("/device:CPU:0", 10, 8, 0, 1, 1, 0, 0)), None,
                         bn.ProgramFacts(calls=tuned))
    assert calm.status == "ok" and calm.actions == ()


def test_a_communication_bound_step_keeps_its_action_beside_the_all_reduce() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 5, 4, 0, 1, 0, 0)), None,
                      bn.ProgramFacts(gradient_bytes=16 * 2**20))
    assert f.evidence["causes"][0] == "communication-bound" and "all-reduced" in f.message
    assert [a.what for a in f.actions] == ["a larger batch per replica"]
    assert f.actions[0].predicted is not None and f.actions[0].predicted.step_s is not None


def test_the_actions_are_each_once_in_the_causes_order() -> None:
    act = Action("a larger batch")
    found = [Cause("gpu-bound", 0.8, "t", "a", {}, (act, Action("XLA"))),
             Cause("small-kernels", 0.5, "t", "a", {}, (act,))]
    pred = {"step_s": 0.004, "fix": "f", "model": "m"}
    out = bn.actions(found, pred, 0.008)
    assert [a.what for a in out] == ["a larger batch", "XLA"]
    assert out[0].predicted == Prediction(0.004, None, None, "f; m", from_s=0.008)


@pytest.mark.parametrize(("predicted", "expected"), [
    (None, None),
    ({"cause": "x", "step_s": None, "why": "not measured"}, Prediction(None, basis="not measured")),
    # the interval as whatif writes it (step_s_low / step_s_high: the model replayed on
    # each profiled step, widened to its stated assumption)
    ({"step_s": 0.0174, "step_s_low": 0.0151, "step_s_high": 0.0199, "fix": "parallel map",
      "model": "max"}, Prediction(0.0174, 0.0151, 0.0199, "parallel map; max")),
    # from the step its model replayed (a host cause's: the call's period)
    ({"step_s": 0.002, "fix": "f", "inputs": {"period_s": 0.005}},
     Prediction(0.002, None, None, "f", from_s=0.005)),
])
def test_whatifs_prediction_becomes_the_actions(predicted, expected) -> None:
    assert whatif.as_prediction(predicted) == expected


def test_a_crash_with_a_known_fix_acts_at_the_users_line() -> None:
    from gpudiag.layout.events import Crash

    crash = Crash(type="ResourceExhaustedError", message="OOM when allocating tensor with shape"
                        "[4096,4096] and type float on /job:localhost/replica:0/task:0/"
                        "device:GPU:0 by allocator GPU_0_bfc", thread="MainThread",
                        user_frame={"file": "/u/train.py", "line": 30, "function": "<module>",
                         "code": "model.fit(x, y)"})
    obs = ProcessObservation(pid=3, ppid=None, argv=["python"], start_env={}, crash=crash)
    f = run_crash.crash([obs], 1)
    assert f.status == "fail" and f.title.startswith("crash: ResourceExhaustedError at train.py:30")
    (a,) = f.actions
    assert a.where == "train.py:30" and a.what == f.advice and a.predicted is None
