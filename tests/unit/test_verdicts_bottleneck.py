"""run.bottleneck from plain data: breakdowns with known shares, the program's tf.data
calls as the hooks record them."""

from __future__ import annotations

from helpers import breakdown

from gpudiag.layout.events import DatasetCall
from gpudiag.readers.steprecords import Breakdown, DeviceBreakdown, StepParts
from gpudiag.verdicts import bottleneck as bn


def call(method: str, line: int, output: int, input_: int | None = None,
         **args: object) -> DatasetCall:
    return DatasetCall(method, dict(args), {"name": "augment", "file": "/u/train.py",
                                            "line": 3, "user": True}, input_, output,
                       {"file": "/u/train.py", "line": line, "function": "<module>",
                        "code": f"line {line}", "direct": True})


PIPELINE = [call("from_tensor_slices", 10, 1), call("map", 11, 2, 1, num_parallel_calls=None),
            call("batch", 12, 3, 2, batch_size=32)]


def test_input_bound_names_the_map_without_parallelism_and_the_missing_prefetch() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                      bn.ProgramFacts(calls=PIPELINE, loop="Model.fit", epochs=3))
    assert f.status == "warn" and f.evidence["causes"] == ["input-bound"]
    assert "input-bound: 50 % of the step (5.00 ms of 10.0 ms) waits for input" in f.message
    assert "Dataset.map(augment) at train.py:11 (`line 11`) runs one element at a time" \
        in f.advice
    assert "the pipeline ending at train.py:12" in f.advice and "no prefetch" in f.advice
    assert ".cache() after the map at train.py:11" in f.advice
    # one epoch: the data is not re-read, no cache advice
    once = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                         bn.ProgramFacts(calls=PIPELINE, epochs=1))
    assert "cache" not in once.advice


def test_a_tuned_pipeline_is_not_blamed_and_moderate_input_is_said() -> None:
    tuned = [call("from_tensor_slices", 10, 1), call("map", 11, 2, 1,
                                                     num_parallel_calls="AUTOTUNE"),
             call("batch", 12, 3, 2, batch_size=32), call("prefetch", 12, 4, 3)]
    assert bn.pipeline_fixes(tuned) == []
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 8, 0, 1, 1, 0, 0)), None,
                      bn.ProgramFacts(calls=tuned))
    assert f.status == "ok" and "moderately input-bound (10 % waits for input)" in f.message
    calm = bn.bottleneck(breakdown(("/device:CPU:0", 10, 9, 0, 0.2, 0.8, 0, 0)), None,
                        bn.ProgramFacts(calls=tuned))
    assert calm.status == "ok" and "no bottleneck stands out" in calm.message


def test_python_between_step_calls_is_host_bound_with_the_loops_line() -> None:
    f = bn.bottleneck(breakdown(("/device:CPU:0", 2, 0.4, 0, 0.1, 1.5, 0, 1.2)), None,
                      bn.ProgramFacts(loop="tf.function train_step",
                                      called_at={"file": "/u/loop.py", "line": 44}))
    assert f.status == "warn" and f.evidence["causes"] == ["host-bound"]
    assert "60 % of the step (1.20 ms of 2.00 ms) is the program's Python" in f.message
    assert "tf.function train_step (the loop at loop.py:44)" in f.advice


def test_on_the_cpu_a_step_call_mostly_without_ops_is_overhead_bound() -> None:
    # tiny ops: TensorFlow's per-step work outweighs them; more steps per call is the fix
    # (a tiny Keras MLP on this machine: 0.64-0.80 ms/step, 0.20 with steps_per_execution=8)
    tiny = breakdown(("/device:CPU:0", 1, 0.13, 0, 0.05, 0.82, 0, 0.01))
    fit = bn.bottleneck(tiny, None, bn.ProgramFacts(loop="Model.fit"))
    assert fit.status == "warn" and fit.evidence["causes"] == ["overhead-bound"]
    assert "overhead-bound: in 81 % of the step (0.810 ms of 1.00 ms) no op ran" in fit.message
    assert "steps_per_execution=N" in fit.advice and "a custom loop" not in fit.advice
    loop = bn.bottleneck(tiny, None, bn.ProgramFacts(loop="tf.function train_step"))
    assert "run several steps in each call of tf.function train_step" in loop.advice
    unknown = bn.bottleneck(tiny, None)  # explain: no loop known, both ways
    assert "Keras: compile" in unknown.advice and "a custom loop:" in unknown.advice
    # beside another cause, that one is named first (the input pipeline to fix), even
    # with the larger share: overhead is what is left when nothing else explains the step
    both = bn.bottleneck(breakdown(("/device:CPU:0", 1, 0.03, 0, 0.41, 0.56, 0, 0)), None)
    assert both.evidence["causes"] == ["input-bound", "overhead-bound"]
    assert both.message.split(": ")[1].startswith("input-bound")
    # under half the step: a usual CPU step, not a finding
    usual = bn.bottleneck(breakdown(("/device:CPU:0", 1, 0.6, 0, 0.05, 0.35, 0, 0)), None)
    assert usual.status == "ok" and usual.evidence["causes"] == []


def test_a_step_function_that_already_loops_over_the_steps_is_not_told_to() -> None:
    """The tf.function guide's ``train(num_steps)``: each call runs 22 training steps (its
    backward ops repeat 22 times in a call, gpudiag.readers.stepbreakdown): the period is a
    call's, said per training step too, and "several steps in each call" is not advised,
    nor a prediction made for it."""
    from dataclasses import replace

    tiny = replace(breakdown(("/device:CPU:0", 1, 0.13, 0, 0.05, 0.82, 0, 0.01)),
                   updates_per_call=22.0)
    f = bn.bottleneck(tiny, None, bn.ProgramFacts(loop="tf.function train"))
    assert f.evidence["causes"] == ["overhead-bound"] and f.evidence["updates_per_call"] == 22
    assert "each step call ran 22 training steps (0.045 ms a training step)" in f.message
    assert "already runs 22 training steps" in f.message
    assert "run several steps in each call" not in f.advice and "XLA" in f.advice
    predicted = f.evidence["predicted"]
    assert predicted["step_s"] is None and "already runs 22 steps a call" in predicted["why"]
    # a few steps a call (under 8): still told to run more
    few = bn.bottleneck(replace(tiny, updates_per_call=2.0), None,
                        bn.ProgramFacts(loop="tf.function train"))
    assert "run several steps in each call" in few.advice
    assert few.evidence["predicted"]["step_s"] is not None


def test_communication_share_per_replica_and_a_straggler() -> None:
    b = breakdown(("/device:CPU:1", 10, 4, 5, 0, 1, 0, 0), ("/device:CPU:2", 10, 6, 3, 0, 1, 0, 0),
                  skew=0.004)
    f = bn.bottleneck(b, None)
    assert f.status == "warn" and f.evidence["causes"] == ["communication-bound", "straggler"]
    assert "collectives (all-reduce) take 40 % of the step" in f.message
    assert "one replica started a step 4.00 ms after another" in f.message
    assert "/device:CPU:1: compute 40 %" in f.message and "/device:CPU:2: compute 60 %" in f.message


def test_gpus_without_kernels_are_named_and_not_judged() -> None:
    b = breakdown(("/device:GPU:0", 10, 9, 0, 0.5, 0.5, 0, 0), source="device-plane",
                  idle=("/device:GPU:1", "/device:GPU:2"))
    f = bn.bottleneck(b, None)
    # the one GPU that ran is 90 % busy in kernels: GPU-bound, beside the idle two
    assert f.status == "warn" and f.evidence["causes"] == ["gpu-bound", "idle-gpus"]
    assert "2 of the 3 GPUs ran no kernel in the window (/device:GPU:1, /device:GPU:2)" \
        in f.message
    assert list(f.evidence["devices"]) == ["/device:GPU:0"]  # the idle ones are not averaged
    assert "compute 90 %" in f.message


def test_python_generators_and_py_functions_are_named() -> None:
    calls = [call("from_generator", 5, 1), call("py_function", 7, 0)]
    fixes = bn.pipeline_fixes(calls)
    assert any("from_generator(augment) at train.py:5" in x for x in fixes)
    assert any("tf.py_function(augment) at train.py:7" in x for x in fixes)


def test_no_trace_is_a_skip_saying_why() -> None:
    f = bn.bottleneck(None, "no profiler window")
    assert f.status == "skip" and "no profiler window" in f.message


def test_a_share_whose_steps_straddle_its_threshold_is_one_warn_saying_near() -> None:
    """Overhead-bound on the CPU at 50 %: profiled steps whose step-call share without ops
    ranges 40-60 % give the cause with "near the threshold" whichever side their mean fell
    on (48 % or 52 % here); steps all at 30-40 % give no cause, all at 60-70 % the cause
    with no such words."""
    def steps(*launch_ms: float) -> Breakdown:
        parts = [StepParts(str(i), 1e-3, (1 - x) * 1e-3, 0, 0, x * 1e-3, 0, 0)
                 for i, x in enumerate(launch_ms)]
        return Breakdown("t.xplane.pb", "host step markers", [p.step for p in parts],
                         [DeviceBreakdown("/device:CPU:0", "placement", parts, 100)], [], None)

    for shares in ((0.40, 0.45, 0.48, 0.52, 0.55), (0.44, 0.50, 0.52, 0.55, 0.59)):
        f = bn.bottleneck(steps(*shares), None, bn.ProgramFacts(loop="Model.fit"))
        assert f.status == "warn" and f.evidence["causes"] == ["overhead-bound"]
        assert "near the threshold: " in f.message and "threshold 50 %" in f.message
        assert "the range of 5 profiled steps" in f.message
        against = f.evidence["cause_evidence"]["overhead-bound"]["against"]
        assert against["side"] == "near" and against["threshold"] == 0.5
    clear = bn.bottleneck(steps(0.6, 0.62, 0.65, 0.7, 0.66), None,
                          bn.ProgramFacts(loop="Model.fit"))
    assert clear.evidence["causes"] == ["overhead-bound"] and "near the" not in clear.message
    below = bn.bottleneck(steps(0.3, 0.32, 0.35, 0.4, 0.36), None,
                          bn.ProgramFacts(loop="Model.fit"))
    assert below.status == "ok" and below.evidence["causes"] == []


def test_a_cause_near_its_threshold_never_outranks_one_clear_of_its_own() -> None:
    """A real random-label fit under load (load average 8 on 2 cores): one of 4 profiled
    steps waited 28 % for input (the mean 12 %), every step's call mostly without ops (74 %
    overhead). Input-bound near 20 % is said, after overhead-bound: the named cause stays
    the one clear of its line."""
    inputs = (0.05, 0.08, 0.07, 0.28)
    parts = [StepParts(str(i), 1e-3, (0.26 - x) * 1e-3, 0, x * 1e-3, 0.74e-3, 0, 0)
             for i, x in enumerate(inputs)]
    b = Breakdown("t.xplane.pb", "host step markers", [p.step for p in parts],
                  [DeviceBreakdown("/device:CPU:0", "placement", parts, 100)], [], None)
    f = bn.bottleneck(b, None, bn.ProgramFacts(loop="Model.fit"))
    assert f.evidence["causes"] == ["overhead-bound", "input-bound"], f.message
    assert "also input-bound: 12 % of the step" in f.message and "near the threshold" in \
        f.message


def test_two_causes_near_their_lines_name_the_one_whose_share_is_over_its_own() -> None:
    """The same program at load 9.5: one of 4 steps waited 67 % for input; input 17 %
    (near 20 %) and overhead 75 % (near 50 %): the named cause is the one over its line."""
    shares = ((0.01, 0.95), (0.02, 0.93), (0.67, 0.25), (0.0, 0.87))
    parts = [StepParts(str(i), 1e-3, (1 - x - o) * 1e-3, 0, x * 1e-3, o * 1e-3, 0, 0)
             for i, (x, o) in enumerate(shares)]
    b = Breakdown("t.xplane.pb", "host step markers", [p.step for p in parts],
                  [DeviceBreakdown("/device:CPU:0", "placement", parts, 100)], [], None)
    f = bn.bottleneck(b, None, bn.ProgramFacts(loop="Model.fit"))
    assert f.evidence["causes"] == ["overhead-bound", "input-bound"], f.message


def test_an_xla_step_called_from_a_python_loop_gets_more_steps_a_call_not_prefetch() -> None:
    """keras-io's XLA custom loop under gpudiag (this machine, loaded): a 1.93 ms step whose
    compiled ops run 0.82 ms; the rest is the loop, next() and entering the function.
    Measured plainly (tests/e2e/test_input_advice_e2e.py): 16 steps a call 1.5-1.9x faster,
    prefetch no faster."""
    no_prefetch = [call("from_tensor_slices", 10, 1), call("batch", 11, 2, 1, batch_size=64)]
    window = breakdown(("/device:CPU:0", 1.93, 0.82, 0, 0.33, 0.79, 0, 0.39))
    f = bn.bottleneck(window, None, bn.ProgramFacts(calls=no_prefetch, jit_compile=True,
                                                    loop="tf.function train_step"))
    assert f.status == "warn" and f.evidence["causes"] == ["overhead-bound"]
    assert "the XLA-compiled step's ops run 42 % of the step" in f.message
    assert "`for _ in tf.range(N): train_step(*next(iterator))`" in f.advice
    assert ".prefetch(tf.data.AUTOTUNE)" not in f.advice
    assert f.evidence["predicted"]["cause"] == "overhead-bound"
    # the same program with both cores busy (make test's check): no op ran in half the
    # step call, TensorFlow's own overhead; the loop still goes outside the compiled step
    # (a loop over the iterator inside the jit_compile function does not compile)
    loaded = bn.bottleneck(breakdown(("/device:CPU:0", 2.83, 0.76, 0, 0.28, 1.79, 0, 0.31)),
                           None, bn.ProgramFacts(calls=no_prefetch, jit_compile=True,
                                                 loop="tf.function train_step"))
    assert loaded.evidence["causes"][0] == "overhead-bound", loaded.message
    assert "no op ran inside the step call" in loaded.message
    assert "`for _ in tf.range(N): train_step(*next(iterator))`" in loaded.advice
    assert "a loop over the iterator inside the tf.function" not in loaded.advice
    # the same trace of a step without XLA: no such cause
    plain = bn.bottleneck(window, None, bn.ProgramFacts(calls=no_prefetch,
                                                        loop="tf.function train_step"))
    assert "overhead-bound" not in plain.evidence["causes"]
    # the same step waiting for its input half the time: input-bound, not this cause
    starved = bn.bottleneck(breakdown(("/device:CPU:0", 2, 0.6, 0, 1.0, 0.4, 0, 0.2)), None,
                            bn.ProgramFacts(calls=no_prefetch, jit_compile=True,
                                            loop="tf.function train_step"))
    assert starved.evidence["causes"] == ["input-bound"] and "prefetch" in starved.advice
    # compiled ops most of the step: nothing to gain per call
    busy = bn.bottleneck(breakdown(("/device:CPU:0", 2, 1.6, 0, 0.1, 0.3, 0, 0.1)), None,
                         bn.ProgramFacts(jit_compile=True, loop="tf.function train_step"))
    assert busy.evidence["causes"] == []


def test_a_fit_window_served_from_a_full_buffer_is_held_to_the_runs_steps() -> None:
    # A serial-map fit whose window missed the wait, as one real run of
    # tests/programs/input_pipeline_fit.py did (its 4 profiled steps waited 1 %, its steps
    # otherwise 70-80 %); the step times here are made up to match: the window's steps
    # 1.1 ms (served from a full buffer), its 90 other steady steps about 11 ms. The
    # window alone names overhead-bound; held to the run's steps it is input-bound, of the
    # run's step, with its interval, and the prediction starts from the run's step.
    window = breakdown(("/device:CPU:0", 1.1, 0.2, 0, 0.011, 0.889, 0, 0))
    periods = [0.0108 + 0.0001 * (k % 7) for k in range(90)]
    alone = bn.bottleneck(window, None, bn.ProgramFacts(calls=PIPELINE, loop="Model.fit",
                                                        epochs=3))
    assert alone.evidence["causes"][0] != "input-bound"
    f = bn.bottleneck(window, None, bn.ProgramFacts(calls=PIPELINE, loop="Model.fit",
                                                    epochs=3, run_periods=periods))
    assert f.evidence["causes"][0] == "input-bound", f.message
    assert f.title.startswith("Model.fit: input-bound: 90 % of a 11.") \
        and "ms step waits for input" in f.title, f.title
    assert "the profiled window's 1.10 ms, of which 1.09 ms not waiting for input" \
        in f.message, f.message
    assert "its own steps waited 1 %" in f.message
    predicted = f.evidence["predicted"]
    assert predicted["inputs"]["period_s"] > 0.0105  # the run's step, not the window's
    assert predicted["step_s"] < predicted["inputs"]["period_s"]
    assert predicted["step_s_low"] <= predicted["step_s"] <= predicted["step_s_high"]
    assert "95 % CI of the run's median step (90 steps" in predicted["interval_from"]
    # a window that saw the run's state (the run's steps as long as its own) stands alone
    same = bn.bottleneck(window, None, bn.ProgramFacts(
        calls=PIPELINE, loop="Model.fit", epochs=3, run_periods=[0.0011] * 90))
    assert same.evidence["causes"] == alone.evidence["causes"]


def test_a_share_under_its_line_is_never_called_the_cause_in_the_title() -> None:
    """Issue 46: MirroredStrategy on two logical CPU devices, the all-reduce 10 % of the
    step, one profiled step's 26 % crossing the 20 % line: the warn stays (near the
    threshold), the title says "near communication-bound ... under its 20 % line", not
    communication-bound alone."""
    comms = (0.03, 0.05, 0.06, 0.26)
    parts = [StepParts(str(i), 1e-3, (1 - x) * 1e-3, x * 1e-3, 0, 0, 0)
             for i, x in enumerate(comms)]
    devices = [DeviceBreakdown(d, "placement", parts, 100)
               for d in ("/device:CPU:0", "/device:CPU:1")]
    f = bn.bottleneck(Breakdown("t.xplane.pb", "host step markers", [p.step for p in parts],
                                devices, [], None), None, bn.ProgramFacts(loop="Model.fit"))
    assert f.status == "warn" and f.evidence["causes"] == ["communication-bound"]
    assert f.title == "near communication-bound (10 % of a 1.00 ms step, under its 20 % line)"
    clear = [StepParts(str(i), 1e-3, 0.6e-3, 0.4e-3, 0, 0, 0) for i in range(4)]
    g = bn.bottleneck(Breakdown("t.xplane.pb", "host step markers", [p.step for p in clear],
                                [DeviceBreakdown("/device:CPU:0", "placement", clear, 100)],
                                [], None), None, bn.ProgramFacts(loop="Model.fit"))
    assert g.title.startswith("Model.fit: communication-bound: all-reduce takes 40 %")
