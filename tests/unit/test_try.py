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
                                       TrialFix("prefetch", "batch", "train.py", 48),
                                       TrialFix("cache", "map", "train.py", 48)]
    # each fix alone is held to its own prediction (by_change), as B/A of the step judged
    assert chosen[0].predicted == pytest.approx((0.5, 0.4, 1.0))
    assert chosen[1].predicted == pytest.approx((0.9, 0.75, 1.0))
    assert chosen[0].as_written == CODE
    assert chosen[0].as_it_would_be == ("dataset = dataset.map(augment, num_parallel_calls="
                                        "tf.data.AUTOTUNE).batch(32)")
    assert chosen[1].as_it_would_be == ("dataset = dataset.map(augment).batch(32)"
                                        ".prefetch(tf.data.AUTOTUNE)")
    # the cache goes after the map, before the batch the same line makes
    assert chosen[2].as_it_would_be == "dataset = dataset.map(augment).cache().batch(32)"
    assert [(n.what, n.why) for n in not_tried] == [
        ("vectorise the map: batch before it", "gpudiag cannot apply it in-process")]


def test_a_fix_whose_call_was_not_recorded_or_is_in_place_is_not_tried() -> None:
    parallel = [Call("map", "train.py", 48, CODE, {"num_parallel_calls": "AUTOTUNE"}, 1, 2)]
    chosen, not_tried = choose(ACTIONS[:1], EVIDENCE, parallel)
    assert not_tried[0].why == "the hooks recorded no call it applies to at that line"
    # the map is parallel already: what is left to try there is deterministic=False, which
    # no action advises and which can change the order (its loss is compared)
    assert [c.fix for c in chosen] == [TrialFix("deterministic", "map", "train.py", 48)]
    assert chosen[0].as_it_would_be == ("dataset = dataset.map(augment, deterministic=False)"
                                        ".batch(32)")
    unordered = [Call("map", "train.py", 48, CODE, {"num_parallel_calls": "AUTOTUNE",
                                                    "deterministic": False}, 1, 2)]
    assert choose(ACTIONS[:1], EVIDENCE, unordered)[0] == []
    chosen, _ = choose(ACTIONS[:1], EVIDENCE, [])
    assert chosen == []


def test_steps_per_execution_takes_the_advised_n_at_the_compile_line() -> None:
    spe = action("pass steps_per_execution=N to compile()", "train.py:60",
                 {"step_s": 0.002, "low_s": 0.0015, "high_s": 0.003, "basis": ""})
    evidence = {"step_s": 0.004, "predicted": {"inputs": {"steps_per_execution": 16}}}
    (c, larger), _ = choose([spe], evidence, CALLS)
    assert c.fix == TrialFix("steps-per-execution", "compile", "train.py", 60, 16)
    assert c.as_it_would_be == 'model.compile("sgd", loss, steps_per_execution=16)'
    assert c.predicted == pytest.approx((0.5, 0.375, 0.75))
    # the value advised, and one larger: the prediction is the advised N's, not held to it
    assert larger.fix == TrialFix("steps-per-execution-larger", "compile", "train.py", 60, 64)
    assert larger.as_it_would_be == 'model.compile("sgd", loss, steps_per_execution=64)'
    assert larger.predicted is None
    assert v.label(larger) == "steps_per_execution=64 at train.py:60"
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
    from gpudiag.fixes import cache

    cf = TrialFix("cache", "map", "train.py", 48)
    assert cache.made(cf, [*CALLS, Call("cache", "train.py", 48, "", {}, 2, 5)])
    assert not cache.made(cf, [*CALLS, Call("cache", "train.py", 48, "", {}, 3, 5)])


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
    _, not_tried = choose([ACTIONS[0], ACTIONS[3]], EVIDENCE, [])
    f = v.not_tried_finding(not_tried)
    assert f is not None and f.status == "skip"
    assert f.title == "not tried: 2 advised fix(es): change by hand"
    assert f.message == (
        "not tried: change it by hand: pass num_parallel_calls=tf.data.AUTOTUNE to "
        "Dataset.map at train.py:48, predicted B/A 0.13 (0.05-0.35) (the hooks recorded no "
        "call it applies to at that line); vectorise the map: batch before it at train.py:48 "
        "(gpudiag cannot apply it in-process)")
    (one,) = choose([action("a larger batch", "train.py:48")], EVIDENCE, CALLS)[1]
    single = v.not_tried_finding([one])
    assert single is not None
    assert single.title == "not tried, change by hand: a larger batch at train.py:48"
    assert v.not_tried_finding([]) is None


def test_the_calls_are_read_back_from_the_hooks_events_in_the_order_made(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from gpudiag import layout
    from gpudiag.commands.trialread import recorded_calls
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
    assert calls[2].args == {"steps_per_execution": 16, "jit_compile": None}
    assert calls[0].code == CODE


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


def test_jit_compile_goes_on_the_advised_compile_and_a_compile_failure_is_dropped() -> None:
    from gpudiag.fixes import jit_compile

    xla = action("XLA: jit_compile=True in compile() or on the tf.function", None)
    (c,), _ = choose([xla], {"step_s": 0.004}, CALLS)  # no line said: the one compile
    assert c.fix == TrialFix("jit-compile", "compile", "train.py", 60)
    assert c.as_it_would_be == 'model.compile("sgd", loss, jit_compile=True)'
    assert jit_compile.apply({"loss": "mse"}, c.fix) == {"loss": "mse", "jit_compile": True}
    jitted = [Call("compile", "train.py", 60, "m.compile()", {"jit_compile": "True"})]
    assert choose([xla], {}, jitted)[0] == []  # already compiled by XLA: nothing to try
    assert jit_compile.made(c.fix, jitted) and not jit_compile.made(c.fix, CALLS)
    jit = Chosen(c.fix, c.as_written, c.as_it_would_be, None)
    failed = [trial("", 1, 0.06), trial("jit-compile", 1, None, 1, "crash: InvalidArgumentError"
                                        ": Detected unsupported operations when trying to "
                                        "compile graph"),
              trial("", 2, 0.06), trial("jit-compile", 2, None, 1, "crash: XLA compilation")]
    f = v.fix_finding(jit, failed)
    assert f.status == "warn" and f.evidence["verdict"] == "not compiled"
    assert f.message.startswith("jit_compile at train.py:60: XLA could not compile the step "
                                "here: crash: InvalidArgumentError")
    assert "broke" not in f.message and f.evidence["ratio"] is None
    assert isinstance(decode(f.id, f.evidence), TriedFix)
    # any other failure under the fix is still the fix breaking the program
    other = [*failed[:1], trial("jit-compile", 1, None, 1, "crash: ValueError at t.py:3")]
    assert v.fix_finding(jit, other).evidence["verdict"] == "broke"


def test_reduce_retracing_is_given_to_the_tf_function_made_at_its_line(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from gpudiag.fixes import reduce_retracing
    from gpudiag.inprogram import agent, trial

    advice = action("decorate step with @tf.function(reduce_retracing=True), or give it an "
                    "input_signature with None in the changing dimension", "train.py:20")
    (c,), _ = choose([advice], {"step_s": 0.01}, [])  # no recorded call needed
    assert c.fix == TrialFix("reduce-retracing", "function", "train.py", 20)
    assert reduce_retracing.rewrite("@tf.function", c.fix) == \
        "@tf.function(reduce_retracing=True)"
    assert reduce_retracing.rewrite("@tf.function(jit_compile=True)", c.fix) == \
        "@tf.function(jit_compile=True, reduce_retracing=True)"
    monkeypatch.setattr(agent, "AGENT", SimpleNamespace(config=RunHookConfig(
        "/e", "/r", trial_fixes=(c.fix,))))
    code = SimpleNamespace(co_filename="/home/u/train.py", co_firstlineno=20)
    assert trial.function_kwargs(code, {"name": "step"}) == {"name": "step",
                                                             "reduce_retracing": True}
    elsewhere = SimpleNamespace(co_filename="/home/u/train.py", co_firstlineno=30)
    assert trial.function_kwargs(elsewhere, {}) == {} and trial.function_kwargs(None, {}) == {}


def lossy(fix: str, round_no: int, losses: dict[int, float]) -> v.Trial:
    return v.Trial(fix, round_no, 0.05, 0, None, f"runs/r{round_no}-{fix or 'a'}",
                   losses=losses)


def test_a_fix_that_can_change_results_has_its_loss_compared_at_matching_steps() -> None:
    from gpudiag.verdicts import trial_loss

    a1, a2 = {0: 2.0, 1: 1.5, 2: 1.0}, {0: 2.0, 1: 1.5, 2: 1.0}
    same = [lossy("", 1, a1), lossy("jit-compile", 1, dict(a1)), lossy("", 2, a2),
            lossy("jit-compile", 2, {0: 2.0, 1: 1.5})]
    c = trial_loss.compare(same, "jit-compile")
    assert c is not None and (c.steps, c.rel_diff, c.own_rel_diff) == (5, 0.0, 0.0)
    assert trial_loss.words(c) == ("the same loss at all 5 matching steps (the loss at step "
                                   "1: 1.5 as written, 1.5 with the fix)")
    moved = [lossy("", 1, a1), lossy("deterministic", 1, {0: 2.0, 1: 1.56, 2: 1.01}),
             lossy("", 2, a2), lossy("deterministic", 2, {0: 2.0, 1: 1.5, 2: 1.0})]
    c = trial_loss.compare(moved, "deterministic")
    assert c is not None and c.rel_diff == pytest.approx(0.04) and c.own_rel_diff == 0.0
    assert trial_loss.words(c).startswith("the loss differs by up to 4.00% over 6 matching "
                                          "steps (the loss at step 2: 1 as written, 1 with")
    assert trial_loss.compare([lossy("", 1, a1), lossy("deterministic", 1, {})],
                              "deterministic") is None
    det = Chosen(TrialFix("deterministic", "map", "train.py", 48), CODE, None, None)
    f = v.fix_finding(det, moved)
    assert "the loss differs by up to 4.00% over 6 matching steps" in f.message
    ev = decode(f.id, f.evidence)
    assert isinstance(ev, TriedFix) and ev.loss_steps == 6 and ev.can_change_results
    assert "losses" not in v.result_finding([det], moved, None).evidence["trials"][0]
    # a fix that cannot change results is not compared
    assert "loss" not in v.fix_finding(PARALLEL, TRIALS).message


def test_try_fixes_reads_a_try_run_back_typed(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gpudiag
    from gpudiag import layout
    from gpudiag.api.trying import read_result
    from gpudiag.session import RunSession

    with RunSession("try", tmp_path) as session:
        for c in (PARALLEL, PREFETCH):
            session.add(v.fix_finding(c, TRIALS))
        result = v.result_finding([PARALLEL, PREFETCH], TRIALS, 110)
        session.set(layout.TRY_DATA, {"headline": result.evidence["headline"]})
        session.add(result)
    back = read_result(session.run_dir, 0)
    assert isinstance(back, gpudiag.TryResult) and back.returncode == 0
    assert back.headline.startswith("tried 2 fixes: num_parallel_calls at train.py:33 makes")
    assert [(f.fix, f.verdict) for f in back.fixes] == [("parallel-map", "faster"),
                                                       ("prefetch", "no change")]
    assert back.run.command == "try" and back.run.path == session.run_dir


@pytest.mark.parametrize(("kwargs", "needle"), [
    ({"fixes": ["mixed-precision"]}, "no such fix: mixed-precision"),
    ({"rounds": 0}, "rounds must be at least 1"),
    ({"argv": "python train.py"}, "argv must be a list of strings"),
])
def test_try_fixes_bad_input_is_one_line_before_anything_runs(tmp_path, kwargs: dict[str, Any],
                                                               needle: str) -> None:  # type: ignore[no-untyped-def]
    import gpudiag

    args = {"argv": ["python", "train.py"], "logdir": tmp_path / "runs", **kwargs}
    with pytest.raises(gpudiag.UsageError, match=needle):
        gpudiag.try_fixes(**args)
    assert not (tmp_path / "runs").exists()


def test_a_custom_loop_s_trial_ends_after_its_step_function_s_calls(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from types import SimpleNamespace

    from gpudiag.commands.tryfixes import judged_loop
    from gpudiag.inprogram import agent, trial

    def throughput(series: str) -> dict[str, Any]:
        return {"findings": [{"id": "run.throughput", "evidence": {"loops": [
            {"series": series, "step_s_median": 0.01}]}}]}

    assert judged_loop(throughput("tf.function train_step")) == "tf.function train_step"
    assert judged_loop({"findings": []}) == "Model.fit"
    config = RunHookConfig("/e", "/r", stop_after_steps=40, stop_function="train_step")
    assert RunHookConfig.from_env({"GPUDIAG_RUN_CONFIG": config.to_env()}) == config
    monkeypatch.setattr(agent, "AGENT", SimpleNamespace(config=config))
    assert not trial.ends_after("train_step", 39) and trial.ends_after("train_step", 40)
    assert not trial.ends_after("eval_step", 400)  # another function: not the loop's
    monkeypatch.setattr(agent, "AGENT", SimpleNamespace(config=RunHookConfig("/e", "/r")))
    assert not trial.ends_after("train_step", 400)  # `gpudiag run`: never ended
    said = v.result_finding([PARALLEL], TRIALS, 40, loop="tf.function train_step").message
    assert ("each trial's process ended after 40 calls of its step tf.function train_step"
            in said and "the trials did not run to their end" in said)
    eager = v.result_finding([PARALLEL], TRIALS, 40, loop="eager step 1").message
    assert "the trials ran eager step 1 to its end" in eager


def test_a_trial_s_exception_is_its_crash_title_and_first_line() -> None:
    from gpudiag.commands.trialread import _crash_of

    found = {"status": "fail", "title": "crash: InvalidArgumentError at train.py:30",
             "evidence": {"message": "Detected unsupported operations when trying to compile "
                          "graph on XLA_CPU_JIT: PyFunc\nStack trace ..."}}
    said = _crash_of(found)
    assert said == ("crash: InvalidArgumentError at train.py:30: Detected unsupported operations "
                    "when trying to compile graph on XLA_CPU_JIT: PyFunc")
    from gpudiag.fixes import jit_compile

    assert jit_compile.did_not_compile(said)
    assert _crash_of({"status": "ok"}) is None
    assert _crash_of({"status": "fail", "title": "crash: ValueError"}) == "crash: ValueError"


def test_the_rounds_stop_early_once_every_fix_s_interval_decides() -> None:
    # three rounds: the parallel map halves the step every time; prefetch changes nothing
    assert not v.decided([PARALLEL, PREFETCH], TRIALS)  # prefetch's interval holds 1.00
    assert v.decided([PARALLEL], TRIALS)
    assert not v.decided([PARALLEL], TRIALS[:3])  # one round: no interval yet
    crashed = [trial("", 1, 0.06), trial("prefetch", 1, None, 1, "crash: ValueError")]
    assert v.decided([PREFETCH], crashed)  # broke the program: more rounds change nothing
    said = v.result_finding([PARALLEL], TRIALS, None, early_after=3)
    assert "stopped early after round 3: every fix's interval already decided" in said.message
    assert said.evidence["early_after_round"] == 3


def test_a_steps_per_execution_trial_counts_its_warm_up_and_stop_in_calls_of_n() -> None:
    from gpudiag.commands.tryfixes import trial_options
    from gpudiag.run.options import RunOptions

    base = RunOptions(profile_warmup_steps=10, stop_after_steps=110)
    spe = trial_options(base, TrialFix("steps-per-execution", "compile", "t.py", 9, 16))
    # the same 160 and 112 training steps as 10 and 110 of the program as written, in calls
    assert (spe.profile_warmup_steps, spe.stop_after_steps) == (1, 7)
    assert spe.trial_fixes == (TrialFix("steps-per-execution", "compile", "t.py", 9, 16),)
    pm = trial_options(base, TrialFix("parallel-map", "map", "t.py", 3))
    assert (pm.profile_warmup_steps, pm.stop_after_steps) == (10, 110)
    assert trial_options(base, None).trial_fixes == ()
    assert trial_options(replace_steps(base), TrialFix("steps-per-execution", "compile",
                                                       "t.py", 9, 4)).stop_after_steps is None


def replace_steps(options: Any) -> Any:
    from dataclasses import replace

    return replace(options, stop_after_steps=None)


def test_the_plan_wraps_its_words_and_keeps_each_code_line_whole() -> None:
    """`gpudiag try`'s plan at 80 columns: the fix's words wrap (indented under it); the
    line as written and as it would be stay whole, to copy."""
    import io

    from rich.console import Console

    from gpudiag.commands.tryfixes import TryOptions, _say_plan
    from gpudiag.ui import Ui

    out = io.StringIO()
    ui = Ui(Console(file=out, width=80, force_terminal=False))
    fix = TrialFix("parallel-map", "map", "train.py", 33)
    written = "dataset = dataset.map(augment).batch(32)"
    fixed = "dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).batch(32)"
    chosen = [Chosen(fix, written, fixed, None)]
    _say_plan(ui, [(1, None), (1, chosen[0])], chosen, {"findings": []},
              TryOptions(rounds=1))
    lines = out.getvalue().splitlines()
    words = [ln for ln in lines[1:] if "as written:" not in ln and "as it would be:" not in ln]
    assert len(words) == 2 and all(len(ln) <= 80 for ln in words), lines
    assert words[0].startswith("  num_parallel_calls at train.py:33: ")
    assert words[1].startswith("    ") and words[1].endswith("at the line")
    assert f"    as written:     {written}" in lines
    assert f"    as it would be: {fixed}" in lines
