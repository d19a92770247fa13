"""Keras calls made one at a time from the program's loop (issue 46, item 1): the hook's
timing per call site (gpudiag.inprogram.kerascalls, on a plain class: no TensorFlow), the
verdict from plain records (gpudiag.verdicts.run.kerascalls), the headline that names them
where no step was measured, and one real `gpudiag run` of a DQN agent (slow)."""

from __future__ import annotations

import itertools
import traceback
from pathlib import Path
from typing import Any

import pytest

from gpudiag.inprogram import kerascalls
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.records.callsites import KerasCallSite
from gpudiag.records.run import ProcessObservation
from gpudiag.verdicts import headline
from gpudiag.verdicts.run import kerascalls as verdict


class _Agent:
    def __init__(self, events_dir: Path) -> None:
        self.config = RunHookConfig(events_dir=str(events_dir), run_dir=str(events_dir))
        self.emitted: list[ev.Event] = []
        self.errors: list[str] = []
        self.exits: list[Any] = []

    def emit(self, event: ev.Event) -> None:
        self.emitted.append(event)

    def hook_error(self, where: str, exc: BaseException) -> None:
        self.errors.append(f"{where}: {exc}")

    def on_exit(self, callback: Any) -> None:
        self.exits.append(callback)


class _Array:
    def __init__(self, rows: int) -> None:
        self.shape = (rows, 4)


def _fake_keras() -> Any:
    class Model:
        def predict(self, x: Any, verbose: int = 0) -> str:
            return "predicted"

        def fit(self, x: Any, y: Any, epochs: int = 1) -> str:
            self.predict(x)  # Keras's own call inside another: not the program's
            return "fitted"

        def __call__(self, x: Any) -> str:
            raise ValueError("the program's own error")

    class Keras:
        pass

    keras = Keras()
    keras.Model = Model  # type: ignore[attr-defined]
    return keras


def test_each_call_is_timed_at_its_line_and_nested_calls_count_once(tmp_path: Path) -> None:
    from gpudiag.inprogram import agent as agent_mod

    keras, agent = _fake_keras(), _Agent(tmp_path)
    kerascalls.install(agent, keras)  # type: ignore[arg-type]
    model = keras.Model()
    for _ in range(3):
        assert model.predict(_Array(1), verbose=0) == "predicted"  # the predict line
    assert model.fit(_Array(32), _Array(32)) == "fitted"
    with pytest.raises(ValueError, match="the program's own error") as raised:
        model(_Array(2))
    # the program's traceback as it is plainly: no frame of gpudiag's (patch's gate, the
    # timing wrapper) between the program's line and its own error
    files = [f.f_code.co_filename for f, _ in traceback.walk_tb(raised.value.__traceback__)]
    assert files == [__file__, __file__]
    for callback in agent.exits:
        callback()
    agent_mod.unpatch_all()
    (event,) = agent.emitted
    assert isinstance(event, lev.KerasCalls) and not agent.errors
    sites = {s["method"]: s for s in event.sites}
    assert set(sites) == {"predict", "fit", "__call__"}  # fit's inner predict not counted
    assert sites["predict"]["calls"] == 3 and sites["predict"]["rows_max"] == 1
    assert sites["predict"]["code"] == \
        'assert model.predict(_Array(1), verbose=0) == "predicted"  # the predict line'
    assert sites["predict"]["file"] == __file__ and sites["predict"]["median_s"] is not None
    assert sites["fit"]["rows_min"] == 32 and sites["__call__"]["calls"] == 1
    assert not hasattr(keras.Model, "__gpudiag_calls__")  # every patch put back
    # the process's resident memory after each call (Linux: /proc/self/statm)
    assert [c for c, _ in event.rss_after_calls] == [1, 2, 3, 4, 5]
    assert all(b > 1 << 20 for _, b in event.rss_after_calls)


def test_a_new_model_at_each_call_is_counted_at_its_site(tmp_path: Path) -> None:
    from gpudiag.inprogram import agent as agent_mod

    keras, agent = _fake_keras(), _Agent(tmp_path)
    kerascalls.install(agent, keras)  # type: ignore[arg-type]
    kept = keras.Model()
    for _ in range(4):  # k-fold: a model built for every fold
        model = keras.Model()
        model.fit(_Array(32), _Array(32))
        kept.predict(_Array(1))  # one model, kept across the folds
    agent.exits[0]()
    agent_mod.unpatch_all()
    sites = {s["method"]: s for s in agent.emitted[-1].sites}
    assert sites["fit"]["models"] == 4 and sites["predict"]["models"] == 1
    assert sites["fit"]["trace_s"] == 0.0  # nothing traced: no TensorFlow here


def test_the_memory_series_stays_bounded_however_many_calls(tmp_path: Path) -> None:
    from gpudiag.inprogram import agent as agent_mod

    keras, agent = _fake_keras(), _Agent(tmp_path)
    kerascalls.install(agent, keras)  # type: ignore[arg-type]
    model = keras.Model()
    for _ in range(1000):
        model.predict(_Array(1))
    agent.exits[0]()
    agent_mod.unpatch_all()
    rss = agent.emitted[-1].rss_after_calls
    assert len(rss) < kerascalls.MAX_POINTS and rss[-1][0] <= 1000
    calls = [c for c, _ in rss]
    assert calls == sorted(calls) and len({b - a for a, b in itertools.pairwise(calls)}) == 1


def _site(method: str, calls: int, total_s: float, line: int, rows: int | None = 1
          ) -> KerasCallSite:
    return KerasCallSite(method, "/home/u/dqn.py", line, f"self.model.{method}(state)",
                         "Sequential", calls, total_s, 0.5, total_s / calls, rows, rows)


def _obs(*sites: KerasCallSite, seconds: float = 40.0) -> ProcessObservation:
    return ProcessObservation(pid=10, ppid=1, argv=["dqn.py"], start_env={},
                              tf_version="2.21.0", first_t_unix_s=1000.0,
                              first_keras_call_t_unix_s=1005.0,
                              last_t_unix_s=1005.0 + seconds, keras_calls=list(sites))


def test_many_small_calls_that_take_the_time_are_named_at_their_lines_with_the_fix() -> None:
    found = verdict.keras_calls(_obs(_site("predict", 400, 20.0, 42), _site("fit", 200, 16.0, 47),
                                     seconds=40.0))
    assert found is not None and found.status == "warn" and found.id == "run.keras-calls"
    assert found.title == "Keras calls in a loop: 600 calls, 90% of the time, predict at dqn.py:42"
    assert "400 calls of Sequential.predict at dqn.py:42" in found.message
    assert "a median 50.0 ms a call for 1 row(s) each" in found.message
    assert [a.where for a in found.actions] == ["dqn.py:42", "dqn.py:47"]
    assert "`model(x, training=False)`" in found.actions[0].what
    assert "train_on_batch" in found.actions[1].what
    # what the time did not go to is said as such
    small = verdict.keras_calls(_obs(_site("predict", 400, 2.0, 42), seconds=40.0))
    assert small is not None and small.status == "ok" and "not what the time went to" in \
        small.message


def test_few_calls_or_large_batches_are_no_loop_of_small_calls() -> None:
    assert verdict.keras_calls(_obs(_site("fit", 1, 39.0, 30, rows=60000))) is None
    assert verdict.keras_calls(_obs(_site("predict", 9, 30.0, 42))) is None
    assert verdict.keras_calls(_obs(_site("predict", 100, 30.0, 42, rows=10000))) is None
    # a dataset or generator a call: its batches carry Keras's per-call work
    assert verdict.keras_calls(_obs(_site("fit", 50, 39.0, 30, rows=None))) is None
    # fit one epoch of a small array at a time: one fit with epochs=N is the fix there
    epochs = verdict.keras_calls(_obs(_site("fit", 50, 39.0, 30, rows=200)))
    assert epochs is not None and "one fit over the whole data with epochs=N" in \
        epochs.actions[0].what
    unknown = ProcessObservation(pid=1, ppid=None, argv=[], start_env={},
                                 keras_calls=[_site("predict", 100, 30.0, 42)])
    said = verdict.keras_calls(unknown)
    assert said is not None and said.status == "skip"


def test_the_headline_names_the_keras_calls_not_an_unmeasured_bottleneck() -> None:
    found = verdict.keras_calls(_obs(_site("predict", 400, 20.0, 42), _site("fit", 200, 16.0, 47)))
    assert found is not None
    report = {"command": "run", "devices": {}, "data": {}, "findings": [
        {"id": "run.bottleneck", "status": "skip", "message": "no loop passed its warm-up",
         "title": "no loop passed its warm-up", "evidence": {}}, found.to_dict()]}
    line = headline.bottleneck_line(report) or ""
    assert line.startswith("bottleneck: Keras calls in a loop: 600 calls"), line
    assert "fix at dqn.py:42: call the model directly" in line
    assert "not measured" not in line


MIB = 1 << 20


def _memory(sizes_mib: list[float], every: int = 10) -> ProcessObservation:
    points = [((i + 1) * every, int(m * MIB)) for i, m in enumerate(sizes_mib)]
    return ProcessObservation(pid=10, ppid=1, argv=["predict_loop.py"], start_env={},
                              rss_after_calls=points)


def test_memory_that_rises_then_levels_off_is_no_leak_with_where_it_levelled() -> None:
    # allocator caching over varying sizes: up for 50 calls, then within a few MiB
    found = verdict.memory_over_calls(_memory([900, 1100, 1300, 1450, 1500, 1502, 1499,
                                               1503, 1501, 1500, 1502, 1501]))
    assert found is not None and found.status == "ok"
    assert found.title == "no leak: memory levelled at 1501 MiB after 50 calls"
    assert "rose from 900 MiB after call 10" in found.message
    flat = verdict.memory_over_calls(_memory([700.0] * 10))
    assert flat is not None and flat.title == "no leak: memory flat at 700 MiB over 100 Keras calls"


def test_memory_still_growing_over_the_second_half_is_said_with_its_rate() -> None:
    found = verdict.memory_over_calls(_memory([900 + 20 * i for i in range(12)]))
    assert found is not None and found.status == "warn"
    assert "grew by 100 MiB over its last 50 Keras calls" in found.message
    assert "2048 KiB a call" in found.message
    assert "a model or tf.function built anew inside the loop" in (found.advice or "")
    assert verdict.memory_over_calls(_memory([900, 1000, 1100])) is None  # too few readings


def _fold_site(method: str, line: int, models: int, total_s: float, trace_s: float
               ) -> KerasCallSite:
    return KerasCallSite(method, "/home/u/kfold.py", line, f"model.{method}(x, y)",
                         "Sequential", 10, total_s, total_s / 10, total_s / 10, 60, 540,
                         models, trace_s)


def test_a_model_built_for_every_fit_is_named_with_its_tracing_and_memory() -> None:
    obs = ProcessObservation(
        pid=10, ppid=1, argv=["kfold.py"], start_env={},
        keras_calls=[_fold_site("fit", 52, 10, 40.0, 30.0),
                     _fold_site("evaluate", 53, 10, 10.0, 6.0)],
        rss_after_calls=[(c, int((745 + 7 * c) * MIB)) for c in range(1, 21)])
    found = verdict.model_rebuilt(obs)
    assert found is not None and found.status == "warn" and found.id == "run.model-rebuilt"
    assert "Sequential.fit at kfold.py:52 (`model.fit(x, y)`) ran on 10 different models " \
        "in 10 calls: tracing took 30.0 s of the calls' 40.0 s (75 %)" in found.message
    assert "from 752 MiB after call 1 to 885 MiB after call 20 (14.8 MiB a model)" in \
        found.message
    (action,) = found.actions
    assert action.where == "kfold.py:52" and "build and compile the model once" in action.what
    assert "model.set_weights(initial)" in (found.advice or "")
    assert found.title == "a new model for every fit: 10 models, tracing 72 % of their calls' time"
    # the memory finding points at the same site and fix
    grows = verdict.memory_over_calls(obs)
    assert grows is not None and grows.status == "warn"
    assert (grows.advice or "").startswith("Sequential.fit at kfold.py:52 ran on a new model in "
                                           "10 of its 10 calls: build the model once")


def test_models_built_with_little_tracing_or_one_model_reused_say_so_or_nothing() -> None:
    light = ProcessObservation(pid=1, ppid=None, argv=[], start_env={},
                               keras_calls=[_fold_site("fit", 52, 10, 40.0, 2.0)])
    ok = verdict.model_rebuilt(light)
    assert ok is not None and ok.status == "ok" and "not what it went to" in ok.message
    reused = ProcessObservation(pid=1, ppid=None, argv=[], start_env={},
                                keras_calls=[_fold_site("fit", 52, 1, 40.0, 3.0)])
    assert verdict.model_rebuilt(reused) is None
    two = ProcessObservation(pid=1, ppid=None, argv=[], start_env={},  # a model and its twin
                             keras_calls=[_fold_site("fit", 52, 2, 40.0, 30.0)])
    assert verdict.model_rebuilt(two) is None


def test_the_headline_names_the_rebuilt_models_over_one_fits_steps_that_were_fine() -> None:
    """A k-fold's fits: the step the profiled fit measured is ok (no cause stands out), the
    tracing of a new model each fold is where the time went: the verdict's bottleneck line
    names that, with its fix; a step with a cause of its own stays first."""
    obs = ProcessObservation(pid=10, ppid=1, argv=["kfold.py"], start_env={},
                             keras_calls=[_fold_site("fit", 52, 10, 40.0, 30.0)])
    rebuilt = verdict.model_rebuilt(obs)
    assert rebuilt is not None and rebuilt.status == "warn"
    step = {"id": "run.bottleneck", "status": "ok", "title": "Model.fit: none stands out",
            "message": "Model.fit: none stands out", "evidence": {"causes": []}}
    report = {"command": "run", "devices": {}, "data": {}, "findings": [step,
                                                                        rebuilt.to_dict()]}
    line = headline.bottleneck_line(report) or ""
    assert line.startswith("bottleneck: a new model for every fit: 10 models"), line
    assert "fix at kfold.py:52: build and compile the model once" in line
    slow = {**step, "status": "warn", "title": "Model.fit: input-bound: 60 % of the step",
            "evidence": {"causes": ["input-bound"]}}
    report["findings"] = [slow, rebuilt.to_dict()]
    assert (headline.bottleneck_line(report) or "").startswith(
        "bottleneck: Model.fit: input-bound")
