"""`gpudiag try`'s pure parts with plain data: the fixes chosen from a diagnosis, the line as
it would be, B/A with its interval across rounds, the verdict's words and its first line;
the hooks' configuration that carries the fixes into the program."""

from __future__ import annotations

import math
from typing import Any

import pytest

from gpudiag.fixes import Chosen, add_argument, parallel_map, prefetch, steps_per_execution
from gpudiag.fixes.choice import choose
from gpudiag.fixes.lines import Call
from gpudiag.inprogram.config import RunHookConfig
from gpudiag.layout.compared import TriedFix
from gpudiag.layout.evidence import decode
from gpudiag.records.trial import TrialFix
from gpudiag.verdicts import headline
from gpudiag.verdicts import trial as v

CODE = "dataset = dataset.map(augment).batch(32)"
CALLS = [Call("from_tensor_slices", "train.py", 40, "dataset = tf.data.Dataset.from_tensor_"
              "slices((x, y))", {}, None, 1),
         Call("map", "train.py", 48, CODE, {"num_parallel_calls": None}, 1, 2),
         Call("batch", "train.py", 48, CODE, {"batch_size": 32}, 2, 3),
         Call("compile", "train.py", 60, 'model.compile("sgd", loss)',
              {"steps_per_execution": None})]


def action(what: str, where: str | None, predicted: dict[str, Any] | None = None
           ) -> dict[str, Any]:
    return {"what": what, "where": where, "predicted": predicted}


EVIDENCE = {"step_s": 0.060, "predicted": {"by_change": {
    "parallel": {"step_s": 0.030, "step_s_low": 0.024, "step_s_high": 0.060},
    "prefetch": {"step_s": 0.054, "step_s_low": 0.045, "step_s_high": 0.060}}}}
ACTIONS = [action("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map", "train.py:48",
                  {"step_s": 0.008, "low_s": 0.003, "high_s": 0.021, "basis": "all three"}),
           action("end the pipeline with .prefetch(tf.data.AUTOTUNE)", "train.py:48"),
           action("call .cache() after the map", "train.py:48"),
           action("vectorise the map: batch before it", "train.py:48")]


def test_the_advised_fixes_gpudiag_applies_are_chosen_the_others_listed_by_hand() -> None:
    chosen, not_tried = choose(ACTIONS, EVIDENCE, CALLS)
    assert [c.fix for c in chosen] == [TrialFix("parallel-map", "map", "train.py", 48),
                                       TrialFix("prefetch", "batch", "train.py", 48)]
    # each fix alone is held to its own prediction (by_change), as B/A of the step judged
    assert chosen[0].predicted == pytest.approx((0.5, 0.4, 1.0))
    assert chosen[1].predicted == pytest.approx((0.9, 0.75, 1.0))
    assert chosen[0].as_written == CODE
    assert chosen[0].as_it_would_be == ("dataset = dataset.map(augment, num_parallel_calls="
                                        "tf.data.AUTOTUNE).batch(32)")
    assert chosen[1].as_it_would_be == ("dataset = dataset.map(augment).batch(32)"
                                        ".prefetch(tf.data.AUTOTUNE)")
    assert [(n.what, n.why) for n in not_tried] == [
        ("call .cache() after the map", "gpudiag cannot apply it in-process"),
        ("vectorise the map: batch before it", "gpudiag cannot apply it in-process")]


def test_a_fix_whose_call_was_not_recorded_or_is_in_place_is_not_tried() -> None:
    parallel = [Call("map", "train.py", 48, CODE, {"num_parallel_calls": "AUTOTUNE"}, 1, 2)]
    chosen, not_tried = choose(ACTIONS[:1], EVIDENCE, parallel)
    assert chosen == [] and not_tried[0].why == ("the hooks recorded no call it applies to "
                                                 "at that line")
    chosen, _ = choose(ACTIONS[:1], EVIDENCE, [])
    assert chosen == []


def test_steps_per_execution_takes_the_advised_n_at_the_compile_line() -> None:
    spe = action("pass steps_per_execution=N to compile()", "train.py:60",
                 {"step_s": 0.002, "low_s": 0.0015, "high_s": 0.003, "basis": ""})
    evidence = {"step_s": 0.004, "predicted": {"inputs": {"steps_per_execution": 16}}}
    (c,), _ = choose([spe], evidence, CALLS)
    assert c.fix == TrialFix("steps-per-execution", "compile", "train.py", 60, 16)
    assert c.as_it_would_be == 'model.compile("sgd", loss, steps_per_execution=16)'
    assert c.predicted == pytest.approx((0.5, 0.375, 0.75))
    assert steps_per_execution.apply({"loss": "mse"}, c.fix) == {
        "loss": "mse", "steps_per_execution": 16}


@pytest.mark.parametrize(("code", "method", "argument", "written"), [
    ("ds = ds.map(f)", "map", "x=1", "ds = ds.map(f, x=1)"),
    ("ds = ds.map(lambda a: g(a, 2)).batch(3)", "map", "x=1",
     "ds = ds.map(lambda a: g(a, 2), x=1).batch(3)"),
    ("model.compile()", "compile", "steps_per_execution=8",
     "model.compile(steps_per_execution=8)"),
    ("ds = ds.map(f,", "map", "x=1", None),  # the call goes on past this line
    ("ds = ds.batch(3)", "map", "x=1", None),  # no such call on the line
    ("ds = ds.remap(f)", "map", "x=1", None),  # no call of map itself
])
def test_a_line_gets_its_argument_where_its_call_closes_on_it(
        code: str, method: str, argument: str, written: str | None) -> None:
    assert add_argument(code, method, argument) == written


def test_the_in_program_changes_leave_what_the_program_gave_alone() -> None:
    fix = TrialFix("parallel-map", "map", "train.py", 48)
    assert parallel_map.apply({}, fix) == {"num_parallel_calls": -1}
    assert parallel_map.apply({"num_parallel_calls": 4}, fix) == {"num_parallel_calls": 4}
    recorded = [Call("map", "train.py", 48, CODE, {"num_parallel_calls": "AUTOTUNE"}, 1, 2)]
    assert parallel_map.made(fix, recorded) and not parallel_map.made(fix, CALLS)
    pf = TrialFix("prefetch", "batch", "train.py", 48)
    assert prefetch.made(pf, [*CALLS, Call("prefetch", "train.py", 48, "", {}, 3, 4)])
    assert not prefetch.made(pf, [*CALLS, Call("prefetch", "train.py", 48, "", {}, 2, 4)])


def test_the_trial_fixes_reach_the_program_through_the_environment() -> None:
    config = RunHookConfig("/e", "/r", trial_fixes=(TrialFix("parallel-map", "map", "t.py", 3),
                                                    TrialFix("steps-per-execution", "compile",
                                                             "t.py", 9, 16)),
                           stop_after_steps=40)
    back = RunHookConfig.from_env({"GPUDIAG_RUN_CONFIG": config.to_env()})
    assert back == config


def test_the_ratio_is_the_geometric_mean_of_the_rounds_with_a_t_interval() -> None:
    ratio, low, high = v.ratio_interval([0.5, 0.5, 0.5])
    assert (ratio, low, high) == pytest.approx((0.5, 0.5, 0.5))
    ratio, low, high = v.ratio_interval([0.4, 0.6])
    logs = [math.log(0.4), math.log(0.6)]
    half = 12.706 * abs(logs[0] - logs[1]) / math.sqrt(2) / math.sqrt(2)
    assert ratio == pytest.approx(math.sqrt(0.24))
    assert low == pytest.approx(ratio * math.exp(-half))
    assert high == pytest.approx(ratio * math.exp(half))
    assert v.ratio_interval([0.5])[1:] == (None, None)


def trial(fix: str, round_no: int, step_s: float | None, code: int = 0,
          crash: str | None = None) -> v.Trial:
    return v.Trial(fix, round_no, step_s, code, crash, f"runs/r{round_no}-{fix or 'a'}", None)


def chosen(name: str, method: str, predicted: tuple[float, float | None, float | None] | None
           ) -> Chosen:
    return Chosen(TrialFix(name, method, "train.py", 33), CODE, CODE + "  # fixed", predicted)


PARALLEL = chosen("parallel-map", "map", (0.5, 0.4, 0.9))
PREFETCH = chosen("prefetch", "batch", (0.9, 0.8, 1.0))
# three rounds: the parallel map halves the step, prefetch changes nothing
TRIALS = [t for r, (a, b, c) in enumerate([(0.060, 0.030, 0.061), (0.064, 0.031, 0.062),
                                           (0.058, 0.030, 0.059)], 1)
          for t in (trial("", r, a), trial("parallel-map", r, b), trial("prefetch", r, c))]


def test_each_fix_is_measured_against_the_same_rounds_program_as_written() -> None:
    m = v.measure(TRIALS, "parallel-map")
    assert m is not None and len(m.per_round) == 3
    assert m.per_round[1] == pytest.approx(0.031 / 0.064)
    assert m.a_s == pytest.approx(0.060) and m.b_s == pytest.approx(0.030)
    assert v.verdict_of(m, None) == "faster"
    assert v.verdict_of(v.measure(TRIALS, "prefetch"), None) == "no change"
    # a round whose program as written measured nothing is left out, not paired elsewhere
    partial = [trial("", 1, None), trial("parallel-map", 1, 0.03), *TRIALS[3:]]
    m2 = v.measure(partial, "parallel-map")
    assert m2 is not None and len(m2.per_round) == 2


def test_rounds_that_all_agree_but_are_too_few_for_the_interval_cannot_tell() -> None:
    # steps_per_execution on a loaded machine: 9x and 4x faster, two rounds (t = 12.7)
    two = [trial("", 1, 0.0035), trial("steps-per-execution", 1, 0.00038),
           trial("", 2, 0.0014), trial("steps-per-execution", 2, 0.00036)]
    m = v.measure(two, "steps-per-execution")
    assert m is not None and m.low is not None and m.high is not None and m.low < 1 < m.high
    assert v.verdict_of(m, None) == "cannot tell"
    assert v.said(m, "cannot tell").startswith("cannot tell: every round faster (B/A 0.11-0.26)"
                                               ", but the 95 % CI ")
    spe = chosen("steps-per-execution", "compile", None)
    assert v.first_line([spe], two) == ("the 1 fix tried was not shown to help here: too few "
                                        "rounds to decide (more --rounds)")
    # rounds either side of 1.00: no change, said as such
    mixed = [*two[:2], trial("", 2, 0.0014), trial("steps-per-execution", 2, 0.0015)]
    assert v.verdict_of(v.measure(mixed, "steps-per-execution"), None) == "no change"


def test_the_first_line_is_the_best_measured_fix() -> None:
    line = v.first_line([PARALLEL, PREFETCH], TRIALS)
    assert line.startswith("tried 2 fixes: num_parallel_calls at train.py:33 makes a step "
                           "2.0x faster (95 % CI ")
    assert line.endswith(", 3 rounds)")
    slow = [trial(f, r, s) for f, r, s in (("", 1, 0.060), ("", 2, 0.060),
                                            ("prefetch", 1, 0.061), ("prefetch", 2, 0.059),
                                            ("parallel-map", 1, 0.066),
                                            ("parallel-map", 2, 0.067))]
    assert v.first_line([PARALLEL, PREFETCH], slow) == "none of the 2 fixes tried helped here"
    one_round = TRIALS[:3]  # Ctrl-C after the first round: no interval, no claim
    assert v.first_line([PARALLEL, PREFETCH], one_round) == (
        "none of the 2 fixes tried was shown to help here: too few rounds to decide (more "
        "--rounds)")


def test_a_fix_that_crashes_where_the_program_as_written_did_not_broke_it() -> None:
    crashed = [*TRIALS[:1], trial("parallel-map", 1, None, 1, "crash: ValueError at train.py:33"),
               *TRIALS[2:4], trial("parallel-map", 2, 0.01), *TRIALS[5:]]
    f = v.fix_finding(PARALLEL, crashed)
    assert f.status == "fail"
    assert f.message.startswith("num_parallel_calls at train.py:33: the fix broke the program "
                                "here: crash: ValueError at train.py:33")
    assert "faster" not in f.message
    assert v.first_line([PARALLEL], crashed) == "the 1 fix tried did not help here"


def test_a_fix_finding_carries_the_ratio_interval_change_and_prediction_typed() -> None:
    f = v.fix_finding(PARALLEL, TRIALS)
    assert f.status == "ok" and f.id == "try.fix.parallel-map"
    assert "2.00x faster (95 % CI" in f.message
    assert "interval is from the run-to-run variation of B/A across rounds" in f.message
    assert f"as written: `{CODE}`" in f.message
    assert "predicted B/A 0.50 (0.40-0.90): measured 0.50, inside it" in f.message
    ev = decode(f.id, f.evidence)
    assert isinstance(ev, TriedFix)
    assert ev.verdict == "faster" and ev.rounds == 3 and ev.inside is True
    assert ev.ratio == pytest.approx(0.5, rel=0.03)
    assert ev.ratio_low is not None and ev.ratio_high is not None
    assert ev.ratio_low < ev.ratio < ev.ratio_high < 1
    assert ev.as_written == CODE and ev.as_it_would_be == CODE + "  # fixed"
    outside = v.fix_finding(PREFETCH, TRIALS)
    assert outside.status == "warn" and "outside it" in outside.message


def test_the_verdict_puts_try_s_answer_first() -> None:
    result = v.result_finding([PARALLEL, PREFETCH], TRIALS, 110)
    assert "each fit stopped after 110 steps: the trials did not run to their end" in \
        result.message
    report = {"command": "try", "findings": [result.to_dict()],
              "data": {"try": {"headline": result.evidence["headline"]}}}
    lines = headline.verdict(report)
    assert lines[0].startswith("tried 2 fixes: num_parallel_calls at train.py:33 makes a")
    assert lines[1].strip().endswith("3 rounds)")  # wrapped, never cut
    assert lines[2].startswith("gpudiag try: 0 failed") and all(len(ln) < 80 for ln in lines)


def test_the_terminal_shows_each_fix_s_measurement_change_and_prediction() -> None:
    f = v.fix_finding(PARALLEL, TRIALS)
    assert f.title.startswith("num_parallel_calls: 2.00x faster (95 % CI ")
    ev = decode(f.id, f.evidence)
    assert isinstance(ev, TriedFix)
    lines = v.shown(ev, f.message.split("; ", 1)[0])
    assert lines[0].startswith("num_parallel_calls at train.py:33: 2.00x faster (95 % CI ")
    assert lines[1:] == [f"  as written:     {CODE}",
                         f"  as it would be: {CODE}  # fixed",
                         "  predicted B/A 0.50 (0.40-0.90): measured 0.50, inside it"]
    assert v.fix_finding(PREFETCH, TRIALS).title.startswith("prefetch: no change, B/A 1.0")


def test_an_advised_fix_not_tried_is_listed_with_its_prediction() -> None:
    _, not_tried = choose([ACTIONS[0], ACTIONS[2]], EVIDENCE, [])
    f = v.not_tried_finding(not_tried)
    assert f is not None and f.status == "skip"
    assert f.title == "not tried: 2 advised fix(es): change by hand"
    assert f.message == (
        "not tried: change it by hand: pass num_parallel_calls=tf.data.AUTOTUNE to "
        "Dataset.map at train.py:48, predicted B/A 0.13 (0.05-0.35) (the hooks recorded no "
        "call it applies to at that line); call .cache() after the map at train.py:48 "
        "(gpudiag cannot apply it in-process)")
    (one,) = choose([ACTIONS[2]], EVIDENCE, CALLS)[1]
    single = v.not_tried_finding([one])
    assert single is not None
    assert single.title == "not tried, change by hand: call .cache() after the map at train.py:48"
    assert v.not_tried_finding([]) is None


def test_the_calls_are_read_back_from_the_hooks_events_in_the_order_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpudiag import layout
    from gpudiag.commands.tryfixes import recorded_calls
    from gpudiag.layout import events, loopevents

    program = layout.child_dir(tmp_path, layout.RUN_CHILD_NAME)
    at = {"file": "/home/u/train.py", "function": "<module>", "direct": True}
    lines = [events.encode(events.DatasetCall(method="batch", args={"batch_size": 32},
                                              input=2, output=3,
                                              caller={**at, "line": 48, "code": CODE}),
                           t_unix_s=2.0, pid=7, seq=2),
             events.encode(events.DatasetCall(method="map", args={"num_parallel_calls": None},
                                              input=1, output=2,
                                              caller={**at, "line": 48, "code": CODE}),
                           t_unix_s=1.0, pid=7, seq=1),
             events.encode(loopevents.Compile(model="Sequential", steps_per_execution=16,
                                          caller={**at, "line": 60, "code": "m.compile()"}),
                           t_unix_s=3.0, pid=7, seq=3),
             events.encode(events.DatasetCall(method="map", caller=None), t_unix_s=4.0,
                           pid=7, seq=4),  # no line of the program's: not a call to fix
             "not json"]
    (program / layout.run_events_name(7)).write_text("\n".join(lines) + "\n")
    calls = recorded_calls(tmp_path)
    assert [(c.method, c.where, c.input, c.output) for c in calls] == [
        ("map", "train.py:48", 1, 2), ("batch", "train.py:48", 2, 3),
        ("compile", "train.py:60", None, None)]
    assert calls[2].args == {"steps_per_execution": 16} and calls[0].code == CODE


def test_the_time_of_a_trial_is_estimated_from_the_diagnosis() -> None:
    from gpudiag.commands.tryfixes import estimate_trial_s

    report = {"findings": [
        {"id": "run.command", "evidence": {"duration_s": 20.0}},
        {"id": "run.throughput", "evidence": {"loops": [
            {"step_s_median": 0.05, "timed_steps": 130, "warmup_steps": 10}]}}]}
    # start-up: 20 s less 140 steps of 50 ms; then 10 warm-up + 30 measured steps
    assert estimate_trial_s(report, 30) == pytest.approx(13.0 + 40 * 0.05)
    assert estimate_trial_s(report, None) == pytest.approx(20.0)
    assert estimate_trial_s({"findings": []}, 30) is None


def test_the_hooks_apply_a_fix_only_to_the_call_made_at_its_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from gpudiag.inprogram import agent, trial

    def frame(file: str, line: int) -> SimpleNamespace:  # what the wrappers read of one
        return SimpleNamespace(f_code=SimpleNamespace(co_filename=file), f_lineno=line)

    fixes = (TrialFix("parallel-map", "map", "train.py", 48),
             TrialFix("prefetch", "batch", "train.py", 48))
    monkeypatch.setattr(agent, "AGENT", SimpleNamespace(config=RunHookConfig(
        "/e", "/r", trial_fixes=fixes, stop_after_steps=3)))

    class Dataset:
        def prefetch(self, n: int) -> tuple[str, int]:
            return ("prefetched", n)

    at = frame("/home/u/train.py", 48)
    assert trial.call_kwargs("map", at, {"map_func": len}) == {"map_func": len,
                                                               "num_parallel_calls": -1}
    assert trial.call_result("batch", at, Dataset()) == ("prefetched", -1)
    # another method, another line, another file: left as the program made them
    assert trial.call_kwargs("interleave", at, {}) == {}
    assert trial.call_kwargs("map", frame("/home/u/train.py", 49), {}) == {}
    assert trial.call_kwargs("map", frame("/home/u/eval.py", 48), {}) == {}
    assert trial.call_result("map", at, "ds") == "ds"
    model = SimpleNamespace(stop_training=False)
    trial.after_step(model, 2)
    assert model.stop_training is False
    trial.after_step(model, 3)
    assert model.stop_training is True
    monkeypatch.setattr(agent, "AGENT", SimpleNamespace(config=RunHookConfig("/e", "/r")))
    assert trial.call_kwargs("map", at, {}) == {}  # `gpudiag run`: no trial, no change
