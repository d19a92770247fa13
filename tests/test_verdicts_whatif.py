"""gpudiag.verdicts.whatif on breakdowns recorded from real `gpudiag run`s of the programs
under tests/programs (tests/data/whatif/<program>.json: the run.bottleneck evidence), the
arithmetic of each model done again by hand here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from gpudiag.verdicts import whatif

DATA = Path(__file__).parent / "data" / "whatif"


def recorded(program: str) -> tuple[dict[str, Any], dict[str, float]]:
    ev = json.loads((DATA / f"{program}.json").read_text())["evidence"]
    (parts,) = ev["parts_s"].values()
    return ev, parts


def test_input_bound_serial_map_no_prefetch_mapped_every_epoch() -> None:
    ev, p = recorded("input_pipeline_fit")
    assert ev["causes"][0] == "input-bound"
    # consumer = 6.495 - 4.455 = 2.040 ms; the map is serial and mapped in each of 3
    # epochs without cache: with cache the producer costs 0 after the first epoch
    got = whatif.predict(ev["causes"], p, ev, epochs=3, cores=2)
    assert got["step_s"] == pytest.approx(0.00649511975 - 0.004454948)
    assert got["fix"] == "parallel map on 2 cores + prefetch + cache"
    # one epoch: no cache; producer = the wait 4.455 ms / 2 cores = 2.227 ms > consumer
    one = whatif.predict(ev["causes"], p, ev, epochs=1, cores=2)
    assert one["step_s"] == pytest.approx(0.004454948 / 2)
    assert one["fix"] == "parallel map on 2 cores + prefetch"
    # 8 cores: the consumer's 2.040 ms bounds it
    assert whatif.predict(ev["causes"], p, ev, epochs=1, cores=8)["step_s"] == \
        pytest.approx(0.00204017175)


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
    # overhead = host 0.97748 - between 0.00703 = 0.97045 ms; 1.26457 - 0.97045 + 0.97045/16
    overhead = 0.00097748025 - 7.033e-06
    assert got["step_s"] == pytest.approx(0.00126456675 - overhead + overhead / 16)
    assert got["step_s"] * 1e3 == pytest.approx(0.3548, abs=1e-4)
    assert got["fix"] == "steps_per_execution=16"


def test_host_bound_python_between_calls_and_eager() -> None:
    ev, p = recorded("custom_loop_python_between")
    got = whatif.predict(["host-bound"], p, ev)
    assert got["step_s"] == pytest.approx(0.022874929 - 0.004719466)  # 18.155 ms
    eager = whatif.predict(["host-bound"], p, {**ev, "steps_from": "the whole trace"})
    # op time 0.2169 + 11.048 ms, plus a tenth of the host's 11.610 ms
    assert eager["step_s"] == pytest.approx(0.0002168565 + 0.01104800325 + 0.001161006925)
    assert eager["fix"] == "tf.function" and "assumed" in eager["model"]


def test_communication_bound_larger_batch() -> None:
    p = {"period_s": 0.010, "compute_s": 0.004, "input_s": 0.0, "communication_s": 0.006,
         "host_s": 0.0, "idle_s": 0.0}
    ar = {"gradient_bytes_per_replica": 16_000_000, "achieved_bytes_per_s": 4e9}
    got = whatif.predict(["communication-bound"], p, {"allreduce": ar})
    # (10 - 6) x 2 + 16 MB / 4 GB/s = 8 + 4 = 12 ms for the double batch: 6 ms per batch
    assert got["step_s_of_larger_batch"] == pytest.approx(0.012)
    assert got["step_s"] == pytest.approx(0.006)
    none = whatif.predict(["communication-bound"], p, {"allreduce": None})
    assert none["step_s"] is None and "gradient bytes are unknown" in none["why"]


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
