"""run.retracing from plain data as the tf.function hook records it (gpudiag.verdicts.run.
retracing): a step function given two Python numbers that change every call (a hand-decayed
learning rate and the step counter, tests/programs/retrace_python_lr.py) gets one fix
naming both at the call's line, since passing one as a tensor leaves the other retracing;
without a call that traced nothing, the predicted step is said as a bound."""

from __future__ import annotations

from typing import Any

from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts.run import retracing

CALL = {"file": "/u/train.py", "line": 54, "function": "<module>"}


def _changed(*args: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"arg": a, "kind": kind, "was": "0", "now": "1"} for a, kind in args]


def _obs(changed: list[dict[str, Any]], calls: int = 40) -> ProcessObservation:
    steps = [Step(i, 1000.0 + i * 0.25, 0.25, 1.0, tracing=True) for i in range(calls)]
    retraces = [{"trace_s": 0.165, "changed": changed, "called_at": CALL}
                for _ in range(calls - 1)]
    series = StepSeries("function", "tf.function train_step", steps,
                        facts={"retraces": retraces, "file": "/u/train.py", "line": 36})
    return ProcessObservation(pid=1, ppid=None, argv=["train.py"], start_env={},
                              series=[series])


def test_every_python_argument_that_changes_is_one_fix_at_the_call() -> None:
    f = retracing.retracing(_obs(_changed(("lr", "python"), ("step", "python"))))
    assert f.status == "warn"
    (action,) = f.actions
    assert action.what == "pass lr, step as tensors, all of them (tf.constant)"
    assert action.where == "train.py:54"
    assert "train_step(lr=tf.constant(lr), step=tf.constant(step))" in (f.advice or "")
    assert "one left a Python value still traces again" in (f.advice or "")
    assert "lr: a Python value" in f.message and "step: a Python value" in f.message
    # no call traced nothing: the step after the fix is a bound, said as one
    assert action.predicted is not None and action.predicted.basis.startswith(
        "no retrace; at most: a retraced call - its tracing time")
    assert action.predicted.step_s is not None
    assert abs(action.predicted.step_s - (0.25 - 0.165)) < 1e-9


def test_one_python_argument_keeps_its_own_fix_and_other_kinds_theirs() -> None:
    one = retracing.retracing(_obs(_changed(("num_steps", "python"))))
    assert [a.what for a in one.actions] == ["pass num_steps as a tensor (tf.constant)"]
    assert "or hold it in a tf.Variable the loop assigns" in (one.advice or "")
    mixed = retracing.retracing(_obs(_changed(("x", "shape"), ("lr", "python"),
                                              ("y", "shape"))))
    whats = [a.what for a in mixed.actions]
    assert whats[0] == "pass lr as a tensor (tf.constant)"
    assert whats[1].startswith("decorate train_step with @tf.function(reduce_retracing=True)")
    assert mixed.actions[1].where == "train.py:36"
