"""Keras's own callbacks in run.callbacks and run.bottleneck (gpudiag.verdicts.run.
callbacks, step_causes), from plain data as the fit hook records them: placed at the
program's fit line, their whole-run cost (rare saves included) against the fit's time,
the advice from what the program set (save_freq), and the step's own overhead still named
when a typical step's callback time leaves it over its threshold."""

from __future__ import annotations

from typing import Any

from test_verdicts_bottleneck import breakdown

from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts.run import callbacks as run_callbacks

FIT_LINE = {"file": "/u/train.py", "line": 48, "code": "model.fit(x, y, callbacks=callbacks)"}


def _checkpoint(settings: dict[str, Any]) -> dict[str, Any]:
    """ModelCheckpoint(save_freq=100) over 1200 batches: 12 saves of 70 ms, the other
    batches 3 us (the numbers a 3-epoch fit of keras_checkpoint_every_n.py gave)."""
    return {"class": "ModelCheckpoint", "module": "keras.src.callbacks.model_checkpoint",
            **FIT_LINE, "builtin": True, "settings": settings,
            "methods": {"on_train_batch_end": {"calls": 1200, "total_s": 12 * 0.07 + 1188 * 3e-6,
                                               "max_s": 0.07, "median_s": 3e-6}}}


def _obs(callback: dict[str, Any]) -> ProcessObservation:
    steps, t = [], 1000.0
    for i in range(1200):  # every 100th batch's period holds a save
        save = 0.07 if i % 100 == 99 else 0.0
        steps.append(Step(i, t, 0.0015 + save, 2.0))
        t += 0.0015 + save
    fit = StepSeries("fit", "Model.fit", steps, 32, 10, {"callbacks": [callback]})
    return ProcessObservation(pid=1, ppid=None, argv=["train.py"], start_env={}, series=[fit])


def test_a_builtin_checkpoint_is_placed_at_the_fit_line_with_its_whole_run_cost() -> None:
    f = run_callbacks.callbacks(_obs(_checkpoint({"save_freq": 100})), 10)
    assert f.status == "warn"
    assert f.message.startswith("ModelCheckpoint (Keras's own, passed to fit at train.py:48; "
                                "save_freq=100) takes 0.703 ms per step in its batch hooks, "
                                "47 % of the 1.50 ms step")
    (c,) = f.evidence["callbacks"]
    assert c["fit_share"] is not None and 0.3 < c["fit_share"] < 0.35  # 0.84 s of 1.8 + 0.84
    assert "the slowest 70.0 ms: rare expensive batches" in f.message
    assert "model_checkpoint.py" not in f.message + f.advice
    # what the program set is not advised again
    assert "every N batches" not in f.advice
    assert "it already saves every 100 batches (save_freq=100): save less often " \
        "(save_freq=1000 or 'epoch')" in f.advice
    assert "save_weights_only=True" in f.advice
    weights_only = run_callbacks.callbacks(_obs(_checkpoint({"save_freq": 100,
                                                          "save_weights_only": True})), 10)
    assert "save_weights_only" not in weights_only.advice


def test_the_steps_own_overhead_is_still_named_when_the_saves_are_rare() -> None:
    """The profiled window (a few steps, no save) is 84 % overhead: the callback's typical
    batch (3 us) takes almost none of it, so overhead-bound stays with steps_per_execution;
    a callback that costs that much in every batch would still take it off."""
    window = breakdown(("/device:CPU:0", 1.5, 0.2, 0, 0.02, 1.26, 0, 0.02))
    obs = _obs(_checkpoint({"save_freq": 100}))
    rare = run_callbacks.callback_causes(run_callbacks.callback_facts(obs, obs.series[0], 10))
    f = bn.bottleneck(window, None, bn.ProgramFacts(loop="Model.fit", host_causes=rare))
    assert f.evidence["causes"] == ["callbacks", "overhead-bound"], f.message
    assert "steps_per_execution=N" in f.advice and "save_freq=1000" in f.advice
    every = dict(_checkpoint({}), methods={"on_train_batch_end": {
        "calls": 1200, "total_s": 1200 * 0.0009, "max_s": 0.001, "median_s": 0.0009}})
    each = run_callbacks.callback_causes(run_callbacks.callback_facts(_obs(every),
                                                                _obs(every).series[0], 10))
    g = bn.bottleneck(window, None, bn.ProgramFacts(loop="Model.fit", host_causes=each))
    assert g.evidence["causes"] == ["callbacks"], g.message
