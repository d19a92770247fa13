"""gpudiag.verdicts.whatif on breakdowns recorded from real `gpudiag run`s of the programs
under tests/programs (tests/data/whatif/<program>.json: the run.bottleneck evidence), the
arithmetic of each model done again by hand here."""

from __future__ import annotations

import json
from typing import Any

import pytest
from helpers import TESTS_DIR

from gpudiag.verdicts import whatif

DATA = TESTS_DIR / "data" / "whatif"


def recorded(program: str) -> tuple[dict[str, Any], dict[str, float]]:
    ev = json.loads((DATA / f"{program}.json").read_text())["evidence"]
    (parts,) = ev["parts_s"].values()
    return ev, parts


def recorded_devices(program: str) -> tuple[dict[str, Any], dict[str, Any]]:
    ev = json.loads((DATA / f"{program}.json").read_text())["evidence"]
    return ev, ev["parts_s"]


def test_input_bound_serial_map_no_prefetch_mapped_every_epoch() -> None:
    ev, p = recorded("input_pipeline_fit")
    assert ev["causes"][0] == "input-bound"
    # consumer = 6.495 - 4.455 = 2.040 ms; the map is serial and mapped in each of 3
    # epochs without cache: with cache the producer costs 0 after the first epoch, and the
    # consumer's 2.040 ms of CPU over 2 cores (1.020 ms) does not bound it
    got = whatif.predict(ev["causes"], p, ev, epochs=3, cores=2)
    assert got["step_s"] == pytest.approx(0.00649511975 - 0.004454948)
    assert got["fix"] == "parallel map on 2 cores + prefetch + cache"
    assert got["inputs"]["bound"] == "consumer" and got["inputs"]["cores"] == 2
    # one epoch, no cache: the producer 4.455 ms / 2 cores = 2.227 ms, but the consumer's
    # 2.040 ms and the producer's 4.455 ms of CPU share the 2 cores: 6.495 / 2 = 3.248 ms
    one = whatif.predict(ev["causes"], p, ev, epochs=1, cores=2)
    assert one["step_s"] == pytest.approx((0.00204017175 + 0.004454948) / 2)
    assert one["fix"] == "parallel map on 2 cores + prefetch"
    assert one["inputs"]["bound"] == "cores"
    assert "this machine's (os.sched_getaffinity)" in one["model"]
    # 8 cores: 6.495 / 8 = 0.812 ms of CPU a core, producer 0.557 ms: the consumer bounds it
    eight = whatif.predict(ev["causes"], p, ev, epochs=1, cores=8)
    assert eight["step_s"] == pytest.approx(0.00204017175)
    assert eight["inputs"]["bound"] == "consumer"


def test_input_bound_generator_replaced_by_in_memory_tensors() -> None:
    ev, p = recorded("generator_fit")  # benchmarks/_whatif_workload.py gen slow
    assert ev["causes"] == ["input-bound"]
    assert [c["method"] for c in ev["dataset_calls"]] == ["from_generator", "batch"]
    got = whatif.predict(ev["causes"], p, ev, cores=2)
    # the generator's 5.140 ms wait goes, and so do the 0.775 ms of the step's host time
    # while the generator's Python (PyFunc) ran, the step's Python waiting for the GIL:
    # 7.440 - 5.140 - 0.775 = 1.525 ms remain (its CPU over 2 cores does not bound it)
    assert got["step_s"] == pytest.approx(0.00743955825 - 0.00513962775 - 0.00077512175)
    assert got["inputs"]["gil_wait_s"] == pytest.approx(0.00077512175)
    assert got["fix"] == "from_tensor_slices instead of the generator + prefetch"
    assert got["inputs"]["generator"] and "lower bound" in got["model"]
    assert "while the Python ops ran (GIL)" in got["model"]


def test_input_bound_generator_from_a_breakdown_without_the_python_ops() -> None:
    ev, p = recorded("generator_fit_no_python_ops")  # recorded before they were measured
    got = whatif.predict(ev["causes"], p, ev, cores=2)
    # the generator's 7.191 ms go; the consumer's 11.090 - 7.191 = 3.899 ms remain (its
    # CPU over 2 cores, 1.949 ms, does not bound it)
    assert got["step_s"] == pytest.approx(0.01108979525 - 0.00719079825)
    assert got["inputs"]["gil_wait_s"] == 0 and "GIL" not in got["model"]


def test_a_parallel_map_keeps_the_gil_wait_of_a_py_function_it_still_runs() -> None:
    """A serial map (no cache advised: one epoch) gets a parallel map: its Python, if any,
    still runs every batch, so the step's wait for the GIL stays in the consumer."""
    ev, p = recorded("input_pipeline_fit")
    with_python = {**p, "host_python_ops_s": 0.001}
    got = whatif.predict(ev["causes"], with_python, ev, epochs=1, cores=8)
    assert got["inputs"]["gil_wait_s"] == 0
    assert got["inputs"]["consumer_s"] == pytest.approx(p["period_s"] - p["input_s"])


def test_input_bound_already_tuned_or_unrecorded_has_no_number() -> None:
    ev, p = recorded("input_pipeline_fit")
    tuned = [{"method": "map", "args": {"num_parallel_calls": -1}},
             {"method": "prefetch", "args": {}}]
    got = whatif.predict(["input-bound"], p, {**ev, "dataset_calls": tuned}, cores=2)
    assert got["step_s"] is None and "already maps in parallel" in got["why"]
    bare = whatif.predict(["input-bound"], p, {**ev, "dataset_calls": []}, cores=2)
    assert bare["step_s"] is None and "not recorded" in bare["why"]


def test_overhead_bound_steps_per_execution() -> None:
    ev, p = recorded("keras_fit_tiny")
    assert ev["causes"] == ["overhead-bound"]
    got = whatif.predict(ev["causes"], p, ev)
    # per call: the call's host time before its first op and after its last, 0.82934 ms,
    # and the Python between the calls, 0.00828 ms: 0.83762 ms, paid once per 16 steps;
    # the other 0.98379 - 0.82934 - 0.00828 = 0.14617 ms of host time, between the ops,
    # stays. 1.41159 - 0.83762 + 0.83762 / 16 = 0.62632 ms
    per_call = 0.0008293350000000001 + 8.28475e-06
    assert got["step_s"] == pytest.approx(0.00141159025 - per_call + per_call / 16)
    assert got["step_s"] * 1e3 == pytest.approx(0.6263, abs=1e-4)
    assert got["fix"] == "steps_per_execution=16"
    assert got["inputs"]["call_edges_s"] == pytest.approx(0.000829335)
    assert "the gaps between ops stay" in got["model"]


def test_overhead_bound_from_a_breakdown_without_the_call_edges() -> None:
    """A run recorded before the edges were measured: all of the call's host time is
    taken as per-call, and the model says so."""
    ev, p = recorded("keras_fit_tiny_no_edges")
    got = whatif.predict(ev["causes"], p, ev)
    # overhead = host 0.97748 - between 0.00703 = 0.97045 ms; 1.26457 - 0.97045 + 0.97045/16
    overhead = 0.00097748025 - 7.033e-06
    assert got["step_s"] == pytest.approx(0.00126456675 - overhead + overhead / 16)
    assert got["step_s"] * 1e3 == pytest.approx(0.3548, abs=1e-4)
    assert "does not separate the gaps between ops" in got["model"]


def test_host_bound_python_between_calls_and_eager() -> None:
    ev, p = recorded("custom_loop_python_between")
    got = whatif.predict(["host-bound"], p, ev)
    assert got["step_s"] == pytest.approx(0.022874929 - 0.004719466)  # 18.155 ms
    eager = whatif.predict(["host-bound"], p, {**ev, "steps_from": "the whole trace"})
    # no measured share of the dispatch the graph executor keeps: no number; the op time
    # (0.2169 + 11.048 = 11.265 ms) named, never as a floor (a tf.function step measured
    # under the eager ops' time)
    assert eager["step_s"] is None and "graph executor" in eager["why"]
    assert "11.265 ms" in eager["why"] and "is no floor" in eager["why"]


def test_communication_bound_larger_batch() -> None:
    p = {"period_s": 0.010, "compute_s": 0.004, "input_s": 0.0, "communication_s": 0.006,
         "host_s": 0.0, "idle_s": 0.0}
    ar = {"gradient_bytes_per_replica": 16_000_000, "achieved_bytes_per_s": 4e9}
    got = whatif.predict(["communication-bound"], p, {"allreduce": ar})
    # (10 - 6) x 2 + 16 MB / 4 GB/s = 8 + 4 = 12 ms for the double batch: 6 ms per batch
    assert got["step_s"] == pytest.approx(0.012)
    assert got["step_s_per_original_batch"] == pytest.approx(0.006)
    assert got["speedup"] == pytest.approx(0.010 * 2 / 0.012)  # examples per second
    # the host's per-step 1 ms does not double: (11 - 6 - 1) x 2 + 1 + 4 = 13 ms
    hosted = whatif.predict(["communication-bound"], {**p, "period_s": 0.011, "host_s": 0.001},
                            {"allreduce": ar})
    assert hosted["step_s"] == pytest.approx(0.013)
    none = whatif.predict(["communication-bound"], p, {"allreduce": None})
    assert none["step_s"] is None and "gradient bytes are unknown" in none["why"]


def test_communication_bound_recorded_mirrored_step() -> None:
    ev, _ = recorded_devices("mirrored_allreduce")  # benchmarks/_whatif_workload.py mirrored 4
    assert ev["causes"][0] == "communication-bound"
    replicas = [ev["parts_s"][d] for d in ("/device:CPU:1", "/device:CPU:2")]
    mean = {k: sum(r[k] for r in replicas) / 2 for k in replicas[0]}
    got = whatif.predict(ev["causes"], mean, ev)
    ar = ev["allreduce"]
    moved = ar["gradient_bytes_per_replica"] / ar["achieved_bytes_per_s"]
    assert got["step_s"] == pytest.approx(
        (mean["period_s"] - mean["communication_s"] - mean["host_s"]) * 2 + mean["host_s"]
        + moved)
    assert got["fix"] == "batch per replica x2"


def test_idle_devices_spread_and_causes_without_a_model() -> None:
    p = {"period_s": 0.010, "compute_s": 0.008, "input_s": 0.0, "communication_s": 0.0,
         "host_s": 0.002, "idle_s": 0.0}
    ev = {"gpus_without_kernels": ["/device:GPU:1", "/device:GPU:2", "/device:GPU:3"],
          "parts_s": {f"/device:GPU:{i}": {} for i in range(4)}}
    got = whatif.predict(["idle-gpus"], p, ev)
    assert got["step_s"] == pytest.approx(0.010 - 0.008 + 0.008 / 4)  # 4 ms
    for cause in ("launch-bound", "straggler", "small-kernels"):
        assert whatif.predict([cause], p, ev)["step_s"] is None
    assert "no bottleneck" in whatif.predict([], p, ev)["why"]
    assert whatif.nothing_measured("no profiler window")["step_s"] is None


def test_every_prediction_carries_its_interval_from_the_steps_it_was_built_from() -> None:
    """Issue 37: the model replayed on each profiled step gives the interval (a few steps:
    their range); communication-bound's stated assumption widens it to the step with no op
    growing with the batch."""
    from gpudiag.verdicts import whatif as w
    from gpudiag.verdicts.prediction import with_interval

    steps = [{"period_s": 1e-3 * t, "compute_s": 0.1e-3, "communication_s": 0.0,
              "input_s": 0.0, "host_s": 1e-3 * t - 0.1e-3, "idle_s": 0.0,
              "host_between_calls_s": 0.0, "host_call_edges_s": 1e-3 * t - 0.3e-3}
             for t in (0.9, 1.0, 1.2, 1.1)]
    mean = {k: sum(s[k] for s in steps) / 4 for k in steps[0]}
    p = with_interval(w.overhead_bound(mean), [w.overhead_bound(s) for s in steps])
    assert p["step_s_low"] < p["step_s"] < p["step_s_high"]
    assert p["step_s_high"] == max(w.overhead_bound(s)["step_s"] for s in steps)
    # the low end: the gaps between ops taken as per call too (the model's assumption)
    assert p["step_s_low"] == pytest.approx(mean["period_s"] - mean["host_s"]
                                            + mean["host_s"] / 16)
    assert p["interval_from"] == ("the model replayed on the range of 4 profiled steps; its "
                                  "assumption's other end (the gaps between ops paid once a "
                                  "call too)")
    none = with_interval({"cause": "x", "step_s": None, "why": "y"}, [])
    assert "step_s_low" not in none
    comm = w.communication_bound({"period_s": 0.02, "communication_s": 0.008,
                                  "host_s": 0.002}, {"gradient_bytes_per_replica": 8e6,
                                                     "achieved_bytes_per_s": 1e9})
    wide = with_interval(comm, [comm])
    assert wide["step_s_low"] == comm["assumed_low_s"] == pytest.approx(0.010 + 0.002 + 0.008)
    assert "no op's time growing with the batch" in wide["interval_from"]


def test_the_change_a_run_made_is_read_from_its_pipeline() -> None:
    """A run that added a parallel map and prefetch, not cache, is held to that change."""
    from gpudiag.verdicts import whatif as w
    from gpudiag.verdicts.whatif_input import change_key, changes_made, missing_fixes

    def calls(*methods: tuple[str, dict[str, object]]) -> list[dict[str, object]]:
        return [{"method": m, "args": a} for m, a in methods]

    a = calls(("from_tensor_slices", {}), ("map", {"num_parallel_calls": None}),
              ("batch", {}))
    b = calls(("from_tensor_slices", {}), ("map", {"num_parallel_calls": "AUTOTUNE"}),
              ("batch", {}), ("prefetch", {}))
    assert missing_fixes(a, 3) == ["parallel", "prefetch", "cache"]
    assert changes_made(a, b) == frozenset({"parallel", "prefetch"})
    assert change_key(changes_made(a, b)) == "parallel + prefetch"
    parts = {"period_s": 0.01, "input_s": 0.008, "compute_s": 0.002, "host_s": 0.0,
             "idle_s": 0.0, "communication_s": 0.0}
    by = w.input_bound_by_change(parts, [parts, {**parts, "input_s": 0.006}], a, 2, 3)
    assert set(by) == {"parallel", "prefetch", "cache", "parallel + prefetch",
                       "parallel + cache", "prefetch + cache", "parallel + prefetch + cache"}
    assert by["parallel + prefetch + cache"]["step_s"] < by["parallel + prefetch"]["step_s"]
    # no prefetch made: the map's batches are not overlapped with the step
    assert by["parallel"]["step_s"] == pytest.approx(0.002 + 0.008 / 2)
    assert all(v["step_s_low"] <= v["step_s"] <= v["step_s_high"] for v in by.values())
    # a parallel map whose work does not scale: the high end, the map's work on one core
    assert by["parallel"]["step_s_high"] == pytest.approx(0.002 + 0.008)
    assert "does not scale" in by["parallel"]["interval_from"]


def test_a_parallel_map_on_cores_the_program_already_keeps_busy_gains_what_they_have_left(
) -> None:
    # the same recorded serial map, one epoch: with nothing measured of the program's CPU
    # use the model gives the producer's work the 2 cores (3.248 ms); measured after the
    # window, a program keeping 1.9 of its 2 cores busy leaves a parallel map no core to
    # run on: the step is at least 1.9 / 2 of the period (the benchmark's slow map: the
    # fixed program ran no faster)
    ev, p = recorded("input_pipeline_fit")
    free = whatif.predict(ev["causes"], p, ev, epochs=1, cores=2)
    busy = whatif.predict(ev["causes"], p, {**ev, "cpu_use": {"busy_cores": 1.9}}, epochs=1,
                          cores=2)
    assert free["step_s"] == pytest.approx((0.00204017175 + 0.004454948) / 2)
    assert busy["step_s"] == pytest.approx(0.95 * 0.00649511975)
    assert busy["inputs"]["busy_cores"] == 1.9 and busy["inputs"]["bound"] == "cores"
    assert "1.90 of 2 cores the program kept busy after its profiled window" in busy["model"]
    # a fix that takes the producer's work away (cache) is not held to the busy cores
    cached = whatif.predict(ev["causes"], p, {**ev, "cpu_use": {"busy_cores": 1.9}},
                            epochs=3, cores=2)
    assert cached["step_s"] == pytest.approx(0.00649511975 - 0.004454948)


def test_a_parallel_map_of_ops_on_cores_other_work_holds_gains_what_that_work_leaves(
) -> None:
    # the same recorded serial map (its work small matmuls, no Python), one epoch. Measured
    # (docs/accuracy.md): such a map on 2 cores with a busy process on each gained nothing
    # from num_parallel_calls (B/A 1.10 under gpudiag try, 1.22 timed plainly) where idle
    # cores were predicted to give 0.66. The run recorded the machine's load average (7.16)
    # and the cores the program kept busy (0.36): 6.8 cores' worth of other work leaves the
    # fix's threads 1 core, at least, so the prediction is no gain; the step on idle cores
    # stays the interval's low end (the other work may yield them)
    ev, p = recorded("input_pipeline_fit")
    period, consumer, producer = 0.00649511975, 0.00204017175, 0.004454948
    loaded = {**ev, "cpu_use": {"busy_cores": 0.36, "load_1min": 7.16}}
    busy = whatif.predict(ev["causes"], p, loaded, epochs=1, cores=2)
    assert busy["step_s"] == pytest.approx(consumer + producer) == pytest.approx(period)
    assert busy["inputs"]["usable_cores"] == 1.0 and busy["fix"].startswith(
        "parallel map on 1 core ")
    assert busy["assumed_low_s"] == pytest.approx((consumer + producer) / 2)
    assert "6.8 of it other work" in busy["model"]
    # a little other work leaves the cores less of it: 0.2 of 2 -> 1.8 cores
    light = whatif.predict(ev["causes"], p, {**ev, "cpu_use": {"busy_cores": 1.0,
                                                               "load_1min": 1.2}},
                           epochs=1, cores=2)
    assert light["step_s"] == pytest.approx((consumer + producer) / 1.8)
    # not limited: the load not recorded, or a map running Python (its work may be a wait,
    # a file read, which holds no core: measured, such a map gained 0.5 at a load of 4)
    unknown = whatif.predict(ev["causes"], p, {**ev, "cpu_use": {"busy_cores": 0.36}},
                             epochs=1, cores=2)
    assert unknown["step_s"] == pytest.approx((consumer + producer) / 2)
    python = [{**c, "python_ops": ["PyFunc"]} if c["method"] == "map" else c
              for c in ev["dataset_calls"]]
    waiting = whatif.predict(ev["causes"], p, {**loaded, "dataset_calls": python}, epochs=1,
                             cores=2)
    assert waiting["inputs"]["usable_cores"] == 2.0
