"""TF1 distribution named by what the program built (gpudiag.inprogram.tf1dist,
gpudiag.verdicts.run.tf1).

End to end: tensorflow/models' multi-GPU CIFAR-10 trainer (tests/programs/tf1_multitower.py,
its ground truth beside it) under `gpudiag run`: in-graph replication, 2 towers, their
gradients averaged, the variables on /cpu:0, and on this machine (no GPU) the towers'
ops on the CPU. A tf.compat.v1 optimizer used eagerly: nothing recorded as a tower, no
hook error, the program's output unchanged. The between-graph jobs are in
tests/e2e/test_run_ps.py. Then the naming itself on plain records.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag.layout.events import Tf1Distribution
from gpudiag.layout.loopevents import StepStats
from gpudiag.verdicts.run import tf1

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"


@pytest.mark.slow
def test_the_multi_gpu_cifar10_trainer_is_named_in_graph_replication_from_what_it_built(
        tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY,
                   str(PROGRAMS / "tf1_multitower.py"), "--variant=ok")
    # the program's own 0, although a finding failed (run.soft-placement, below)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "step 19, loss = " in proc.stdout
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))
    dist = found["run.distribution"]
    assert dist["status"] == "ok", dist["message"]
    message = dist["message"]
    assert message.startswith("no tf.distribute strategy: in-graph replication: 2 towers on "
                              "/device:GPU:0, /device:GPU:1 (compute_gradients at "
                              "tf1_multitower.py:"), message
    assert "name scopes tower_0, tower_1" in message
    assert "gradients averaged (Mean x6 over 2 tower(s)' gradients) and applied once at " \
        "tf1_multitower.py:" in message
    assert "to 6 variable(s); variables pinned to /device:CPU:0, ran on /device:CPU:0" in message
    # no GPU here: the towers' ops ran on the CPU, said so (run.soft-placement fails on it)
    assert "/device:GPU:0 -> /device:CPU:0, /device:GPU:1 -> /device:CPU:0" in message
    towers = dist["evidence"]["in_graph"]
    assert [t["scope"] for t in towers["towers"]] == ["tower_0", "tower_1"]
    assert towers["combine_ops"] == {"Mean": 6}
    assert found["run.command"]["status"] == "ok", found["run.command"]["message"]
    assert [f for f in found if found[f]["status"] == "fail"] == ["run.soft-placement"]
    assert found["run.tensorflow"]["status"] == "ok", found["run.tensorflow"]["message"]


EAGER_V1_OPTIMIZER = """
import tensorflow as tf
v = tf.Variable(3.0)
opt = tf.compat.v1.train.GradientDescentOptimizer(0.1)
for _ in range(3):
    opt.minimize(lambda: v * v, var_list=[v])
grads = opt.compute_gradients(lambda: v * v, var_list=[v])
opt.apply_gradients(iter(grads))
print("v = %.4f" % v.numpy())
"""


@pytest.mark.slow
def test_a_v1_optimizer_used_eagerly_is_no_tower_and_its_output_is_unchanged(
        tmp_path: Path) -> None:
    """What the program prints alone is known without running it alone: v = 3 * 0.8 ** 4
    after its four updates (the one line it prints; a plain run printed exactly that)."""
    script = tmp_path / "eager_v1.py"
    script.write_text(EAGER_V1_OPTIMIZER)
    proc = gpudiag("run", "--logdir", str(tmp_path / "runs"), "--", PY, str(script))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "v = 1.2288\n" in proc.stdout  # the program's own output, unchanged
    (run_dir,) = run_dirs(tmp_path / "runs")
    found = findings_by_id(load_report(run_dir))
    assert found["run.tensorflow"]["status"] == "ok", found["run.tensorflow"]["message"]
    assert "in-graph" not in found["run.distribution"]["message"]


# ------------------------------------------------------------------ the naming, pure
def _call(api: str, line: int, **args: object) -> Tf1Distribution:
    return Tf1Distribution(api, dict(args),
                           {"file": "/w/train.py", "line": line, "function": "main"})


def _towers(*devices: str, combine: dict[str, int] | None = None) -> list[Tf1Distribution]:
    calls = [_call("compute_gradients", 40, device=d, scope=f"tower_{i}", graph=7, tower=i,
                   variables=4) for i, d in enumerate(devices)]
    if combine is not None:
        calls.append(_call("apply_gradients", 50, graph=7, variables=4, towers=len(devices),
                           towers_combined=len(devices), towers_combined_max=len(devices),
                           combine_ops=combine, variable_devices={"/device:CPU:0": 4},
                           variable_ops=["w", "b"]))
    return calls


def test_towers_on_distinct_devices_with_summed_gradients_are_named_summed() -> None:
    stats = [StepStats(group="g", pinned=[{"requested": "/device:GPU:0", "actual": "/device:GPU:0",
                                  "nodes": 30}, {"requested": "/device:GPU:1",
                                                 "actual": "/device:GPU:1", "nodes": 30}],
                       node_devices={"w": "/device:CPU:0", "b": "/device:CPU:0"})]
    found = tf1.in_graph(_towers("/device:GPU:0", "/device:GPU:1", combine={"AddN": 4}),
                         stats)
    assert found is not None
    text, evidence = found
    assert text.startswith("in-graph replication: 2 towers on /device:GPU:0, /device:GPU:1")
    assert "gradients summed (AddN x4 over 2 tower(s)' gradients)" in text
    assert "ran on /device:CPU:0" in text
    assert "/device:GPU:0 -> /device:GPU:0, /device:GPU:1 -> /device:GPU:1" in text
    assert "soft placement" not in text  # each tower ran where it was pinned
    assert evidence["towers_ran_on"]["/device:GPU:1"] == ["/device:GPU:1"]


def test_one_device_is_no_tower_and_towers_never_combined_are_said_so() -> None:
    assert tf1.in_graph(_towers("/job:worker/task:0"), []) is None
    assert tf1.in_graph(_towers("/device:GPU:0", "/device:GPU:0"), []) is None
    found = tf1.in_graph(_towers("/device:GPU:0", "/device:GPU:1"), [])
    assert found is not None
    assert "no apply_gradients combined the towers' gradients" in found[0]
    assert "averaged" not in found[0]


def test_between_graph_is_named_by_its_constructs_with_the_placement() -> None:
    constructs = tf1.task_constructs([
        _call("replica_device_setter", 52, ps_tasks=2, ps_device="/job:ps",
              worker_device="/job:worker/task:0", cluster_given=True),
        _call("compute_gradients", 60, device="/job:worker/task:0", scope="", graph=1,
              tower=0, variables=2),
        _call("Supervisor", 70, is_chief=True, logdir=False)])
    assert [c["api"] for c in constructs] == ["replica_device_setter", "Supervisor"]
    text = tf1.between_graph(constructs, sync_in_log=False,
                             variables={"ps-0": 2, "ps-1": 1},
                             ops={"worker-0": {"/device:CPU:0": 90}, "ps-0": {"/cpu": 5}},
                             workers=["worker-0", "worker-1"], chiefs=["worker-0"])
    assert text == (
        "between-graph replication (replica_device_setter at train.py:52 (2 ps task(s), "
        "variables to /job:ps, ops to /job:worker/task:0): variables on /job:ps/task:0 (2), "
        "/job:ps/task:1 (1), ops on worker-0 90 (none placed on worker-1 in the logs seen) "
        "(TensorFlow's placement log); Supervisor at train.py:70, chief worker-0; "
        "asynchronous: each worker applies its own updates to the variables on the "
        "parameter servers as it goes, waiting for no other worker (no "
        "SyncReplicasOptimizer))")
    sync = constructs + tf1.task_constructs([_call(
        "SyncReplicasOptimizer", 66, replicas_to_aggregate=2, total_num_replicas=3,
        optimizer="AdamOptimizer")])
    text = tf1.between_graph(sync, sync_in_log=False, variables={}, ops={},
                             workers=["worker-0"])
    assert text is not None
    assert ("synchronous: SyncReplicasOptimizer at train.py:66 aggregating 2 gradient(s) "
            "per update of 3 replica(s)") in text
    assert "no placement seen" in text
    assert tf1.between_graph([], sync_in_log=True, variables={}, ops={}, workers=[]) is None
