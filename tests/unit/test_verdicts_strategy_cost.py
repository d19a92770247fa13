"""run.strategy (gpudiag.verdicts.run.strategy_cost) with plain records: a strategy judged
against no strategy. Issue 46's case: MirroredStrategy over two logical devices of one CPU,
the global batch not scaled (16 a replica), each step 1.65x slower than the same program
without the strategy; run.bottleneck had named "communication-bound" at 10 %, below its
20 % line (its interval crossed it)."""

from __future__ import annotations

from typing import Any

from gpudiag.records.run import (
    DeviceSnapshot,
    ProcessObservation,
    Step,
    StepSeries,
    StrategyRecord,
)
from gpudiag.report import Finding
from gpudiag.verdicts.run import strategy_cost

WARMUP = 10
CPUS = ["/device:CPU:0", "/device:CPU:1"]
AT_STRATEGY = {"file": "/u/train.py", "line": 14, "function": "<module>"}
AT_FIT = {"file": "/u/train.py", "line": 33, "function": "<module>"}


def fit(period_s: float, replicas: int | None, batch: int = 32, steps: int = 60,
        label: str = "Model.fit") -> StepSeries:
    rows = [Step(i, 100.0 + i * period_s * (1 + 0.01 * (i % 3)), period_s / 2, 1.0,
                 epoch=0) for i in range(steps)]
    facts: dict[str, Any] = {"replicas": replicas, "trainable_parameters": 84_234,
                             "strategy": "MirroredStrategy" if replicas else None,
                             "fit_caller": AT_FIT}
    return StepSeries("fit", label, rows, batch, 10, facts)


def observed(*series: StepSeries, physical: list[str] | None = None,
             devices: list[str] = CPUS) -> ProcessObservation:
    strategy = StrategyRecord("MirroredStrategy", len(devices), devices, devices,
                              "CollectiveAllReduce", "RING", False, None, AT_STRATEGY)
    snap = DeviceSnapshot("strategy", physical or ["/physical_device:CPU:0"], devices, [],
                          True, True)
    return ProcessObservation(pid=1, ppid=0, argv=["train.py"], start_env={},
                              tf_version="2.21.0", series=list(series), strategies=[strategy],
                              devices=snap)


def bottleneck(comm: float, causes: list[str], side: str = "near") -> Finding:
    return Finding("run.bottleneck", "warn" if causes else "ok", "...", {
        "shares": {"compute": 0.5, "communication": comm, "idle": 0.1, "host": 0.2},
        "causes": causes, "thresholds": {"communication_bound": 0.2},
        "cause_evidence": {c: {"against": {"value": comm, "low": comm / 2, "high": 0.3,
                                           "threshold": 0.2, "side": side}}
                           for c in causes}})


def test_shared_cores_with_nothing_run_without_the_strategy_say_it_was_not_measured() -> None:
    f = strategy_cost.strategy_cost(observed(fit(0.0165, 2)),
                                    bottleneck(0.10, ["communication-bound"]), WARMUP)
    assert f is not None and f.status == "warn"
    assert "2 logical devices of one CPU (/device:CPU:0, /device:CPU:1 on " \
        "physical_device:CPU:0): they take turns on the same cores" in f.message
    assert "16 examples a replica (global batch 32)" in f.message
    assert "faster or slower than one device was not measured" in f.message
    # the cause is named only at or above its own line: 10 % is under 20 %
    assert "no cause stands out (communication 10 %, under its 20 % line)" in f.message
    assert "communication-bound" not in f.message
    assert f.title == "MirroredStrategy, 2 replicas on one CPU: vs one device: not " \
        "measured"
    drop, scale = f.actions
    assert drop.where == "train.py:14" and "train without the strategy" in drop.what
    assert scale.where == "train.py:33" and scale.what.startswith(
        "batch_size=32 * strategy.num_replicas_in_sync")
    assert "gpudiag diff" in f.advice


def test_a_fit_without_the_strategy_in_the_same_process_says_slower_with_its_interval(
        ) -> None:
    with_it, without = fit(0.0165, 2), fit(0.010, None, label="Model.fit #2")
    f = strategy_cost.strategy_cost(observed(with_it, without), bottleneck(0.1, []), WARMUP)
    assert f is not None and f.status == "warn"
    assert "the strategy makes this job 1.65x slower than one device" in f.message
    assert "95 % CI" in f.message and "(Model.fit #2, a model of the same size)" in f.message
    assert f.evidence["speed"]["interval"][1] < 1
    assert "1.65x slower than no strategy" in f.title
    # the other way round: faster, ok, and no advice to drop the strategy
    fast = strategy_cost.strategy_cost(observed(fit(0.005, 2), without), None, WARMUP)
    assert fast is not None and fast.status == "ok" and "2.00x faster" in fast.message
    assert all("without the strategy" not in a.what for a in fast.actions)
    assert "not measured (no trace of its steps)" in fast.message


def test_a_cause_at_or_above_its_line_is_named() -> None:
    f = strategy_cost.strategy_cost(observed(fit(0.0165, 2)),
                                    bottleneck(0.35, ["communication-bound"], "above"), WARMUP)
    assert f is not None and "the step is communication-bound (35 %, its line 20 %)" in \
        f.message


def test_spoken_only_for_shared_hardware_or_a_small_batch_a_replica() -> None:
    gpus = ["/device:GPU:0", "/device:GPU:1"]
    two = ["/physical_device:CPU:0", "/physical_device:GPU:0", "/physical_device:GPU:1"]
    big = observed(fit(0.01, 2, batch=256), physical=two, devices=gpus)
    assert strategy_cost.strategy_cost(big, None, WARMUP) is None
    small = strategy_cost.strategy_cost(observed(fit(0.01, 2), physical=two, devices=gpus),
                                        None, WARMUP)
    assert small is not None and small.status == "skip"  # nothing measured, nothing shared
    assert [a.where for a in small.actions] == ["train.py:33"]
    # two logical GPUs split from one GPU share it
    split = strategy_cost.strategy_cost(observed(
        fit(0.01, 2, batch=256), physical=["/physical_device:GPU:0"], devices=gpus),
        None, WARMUP)
    assert split is not None and "2 logical devices of one GPU" in split.message
    no_strategy = ProcessObservation(pid=1, ppid=0, argv=["x"], start_env={}, tf_version="2",
                                     series=[fit(0.01, None)])
    assert strategy_cost.strategy_cost(no_strategy, None, WARMUP) is None
