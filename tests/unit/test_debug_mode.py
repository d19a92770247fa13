"""run.debug-mode and the eager-loop fix it changes (gpudiag.verdicts.run.hostcauses), on
the records the agent writes for a debugging switch (gpudiag.layout.events.DebugMode).
The hook that records them runs in tests/e2e/test_host_causes_e2e.py."""

from __future__ import annotations

from gpudiag.layout.events import DebugMode
from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts.run.hostcauses import debug_modes, eager_loop


def _switch(api: str, enabled: bool, line: int) -> DebugMode:
    return DebugMode(api=api, enabled=enabled,
                     caller={"file": "/home/u/train.py", "line": line, "function": "<module>"})


def _obs(*switches: DebugMode, series: list[StepSeries] | None = None) -> ProcessObservation:
    return ProcessObservation(pid=1, ppid=None, argv=["python", "train.py"], start_env={},
                              debug_modes=list(switches), series=series or [])


EAGERLY = "tf.config.run_functions_eagerly"


def test_a_program_that_switched_nothing_gets_no_finding() -> None:
    assert debug_modes(_obs()) is None


def test_a_switch_left_on_is_a_warning_with_its_line_and_what_it_costs() -> None:
    f = debug_modes(_obs(_switch(EAGERLY, True, 5)))
    assert f is not None and f.status == "warn"
    assert f.title == "run_functions_eagerly(True) at train.py:5: every tf.function ran eagerly"
    assert "each op dispatched from Python" in f.message
    assert [(a.what, a.where) for a in f.actions] == [
        ("remove tf.config.run_functions_eagerly(True)", "train.py:5")]


def test_the_latest_call_of_each_switch_decides() -> None:
    f = debug_modes(_obs(_switch("tf.debugging.enable_check_numerics", True, 3),
                         _switch("tf.data.experimental.enable_debug_mode", True, 4),
                         _switch("tf.debugging.disable_check_numerics", False, 9)))
    assert f is not None and f.status == "warn"
    assert f.evidence["left_on"] == ["tf.data.experimental.enable_debug_mode"]
    assert "num_parallel_calls" in f.message and "NaN" not in f.message
    assert [a.what for a in f.actions] == ["remove tf.data.experimental.enable_debug_mode()"]


def test_switches_turned_off_again_are_ok() -> None:
    f = debug_modes(_obs(_switch(EAGERLY, True, 5), _switch(EAGERLY, False, 6)))
    assert f is not None and f.status == "ok" and f.actions == ()
    assert f.evidence["left_on"] == [] and "train.py:6" in f.message


def _steps(n: int) -> list[Step]:
    return [Step(i, 100.0 + 0.02 * i, 0.018, 1.0) for i in range(n)]


def test_a_fit_run_eagerly_by_the_switch_is_an_eager_loop_fixed_at_the_switch() -> None:
    fit = StepSeries("fit", "Model.fit", _steps(40), batch_size=32)
    assert eager_loop(_obs(series=[fit]), 5).status == "ok"  # no switch: no eager loop
    f = eager_loop(_obs(_switch(EAGERLY, True, 6), series=[fit]), 5)
    assert f.status == "warn" and f.message.startswith("Model.fit ran eagerly")
    assert [(a.what, a.where) for a in f.actions] == [
        ("remove tf.config.run_functions_eagerly(True)", "train.py:6")]


def test_an_eager_step_of_a_tf_function_is_fixed_at_the_switch_not_by_wrapping() -> None:
    step = StepSeries("eager", "eager step train_step", _steps(40), facts={
        "file": "/home/u/train.py", "line": 24, "def_line": 19, "code": "tape.gradient"})
    plain = eager_loop(_obs(series=[step]), 5)
    assert [a.what for a in plain.actions] == ["wrap the step in tf.function (@tf.function)"]
    f = eager_loop(_obs(_switch(EAGERLY, True, 5), series=[step]), 5)
    assert f.status == "warn" and "wrap" not in (f.advice or "")
    assert [(a.what, a.where) for a in f.actions] == [
        ("remove tf.config.run_functions_eagerly(True)", "train.py:5")]
