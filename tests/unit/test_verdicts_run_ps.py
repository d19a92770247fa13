"""A parameter-server coordinator's work counted on the cluster's tasks
(gpudiag.readers.clusterplacement, gpudiag.verdicts.run.ps), on lines TensorFlow 2.21
printed here (tests/programs/ps_tutorial_inprocess.py under `gpudiag run`)."""

from __future__ import annotations

from dataclasses import replace

from gpudiag.readers import clusterplacement
from gpudiag.records.run import ClusterJoin, ProcessObservation, StrategyRecord
from gpudiag.report import Finding
from gpudiag.verdicts.run import ps as run_ps

LOG = """\
I0000 00:00:1795521414.074278   11774 execute.cc:2062] Executing op VarHandleOp on task /job:ps/replica:0/task:0/device:CPU:0
I0000 00:00:1795521414.074638   11934 execute.cc:1775] Executing op VarHandleOp in device /job:ps/replica:0/task:0/device:CPU:0
I0000 00:00:1795521414.087880   11774 execute.cc:1775] Executing op VarHandleOp in device /job:ps/replica:0/task:1/device:CPU:0
I0000 00:00:1795521415.100000   11935 placer.cc:162] replica_fn/MatMul: (MatMul): /job:worker/replica:0/task:1/device:CPU:0
I0000 00:00:1795521415.100001   11935 placer.cc:162] args_0: (_Arg): /job:worker/replica:0/task:1/device:CPU:0
I0000 00:00:1795521415.100002   11774 execute.cc:1775] Executing op __inference_step_fn_99 in device /job:worker/replica:0/task:1/device:CPU:0
I0000 00:00:1795521415.100003   11774 execute.cc:1775] Executing op AddV2 in device /job:localhost/replica:0/task:0/device:CPU:0
"""  # noqa: E501


def test_ops_and_variables_are_attributed_by_the_task_the_device_names() -> None:
    assert clusterplacement.ops_by_task(LOG) == {
        "ps-0": {"/device:CPU:0": 1}, "ps-1": {"/device:CPU:0": 1},
        "worker-1": {"/device:CPU:0": 1}}  # plumbing, function calls, localhost left out
    assert clusterplacement.variables_by_task(LOG) == {"ps-0": 1, "ps-1": 1}
    assert clusterplacement.task_device("/job:localhost/replica:0/task:0/device:CPU:0") is None


def _coordinator() -> ProcessObservation:
    spec = {"worker": ["127.0.0.1:1", "127.0.0.1:2"], "ps": ["127.0.0.1:3"]}
    return ProcessObservation(
        pid=1, ppid=0, argv=[], start_env={},
        strategies=[StrategyRecord("ParameterServerStrategyV2", 1, ["/device:CPU:0"], [],
                                   "ReductionToOneDevice", None, False, None,
                                   {"file": "/x/train.py", "line": 12})],
        cluster_joins=[ClusterJoin("ParameterServerStrategy", "chief", 0, spec, "joined")])


def test_a_worker_the_coordinator_never_used_is_named() -> None:
    base = Finding("run.every-device-used", "warn", "no GPU visible to TensorFlow; every "
                   "device did work: /device:CPU:0 (200 ops)")
    by_task = {"worker-0": {"/device:CPU:0": 100}, "ps-0": {"/device:CPU:0": 50}}
    f = run_ps.devices_used(base, _coordinator(), by_task)
    assert f.status == "fail" and "worker-1 did no work" in f.message
    assert f.evidence["idle_tasks"] == ["worker-1"]
    by_task["worker-1"] = {"/device:CPU:0": 90}
    f = run_ps.devices_used(base, _coordinator(), by_task)
    assert f.status == "warn" and "every worker and parameter server did work" in f.message


def test_the_coordinator_s_distribution_says_asynchronous_and_where_work_and_variables_are(
        ) -> None:
    base = Finding("run.distribution", "ok", "ParameterServerStrategy at train.py:12: 1 "
                   "replica(s) on /device:CPU:0; all-reduce ReductionToOneDevice")
    f = run_ps.distribution(base, _coordinator(), {"worker-0": {"/device:CPU:0": 7},
                                                   "ps-0": {"/device:CPU:0": 3}}, {"ps-0": 4})
    assert "asynchronous" in f.message and "2 worker(s), 1 parameter server(s)" in f.message
    assert "steps ran on worker-0 7 ops" in f.message and "variables created on ps-0 4" in \
        f.message
    # a process that is not a coordinator keeps its finding
    other = ProcessObservation(pid=2, ppid=0, argv=[], start_env={})
    assert run_ps.distribution(base, other, {"worker-0": {"/device:CPU:0": 7}}, {}) is base


def test_a_tf1_worker_s_findings_say_where_its_compute_and_the_variables_are() -> None:
    spec = {"ps": ["127.0.0.1:3"], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    obs = ProcessObservation(pid=3, ppid=0, argv=[], start_env={}, sessions=[{}],
                             cluster_joins=[ClusterJoin("tf.distribute.Server", "worker", 1,
                                                        spec, "joined")])
    base = Finding("run.distribution", "ok", "no tf.distribute strategy created")
    f = run_ps.distribution(base, obs, {"worker-1": {"/device:CPU:0": 135},
                                        "ps-0": {"/device:CPU:0": 57}}, {"ps-0": 3})
    assert "between-graph replication" in f.message and "worker-1 of 2 worker(s)" in f.message
    assert "compute on worker-1 135 ops" in f.message and "variables on ps-0 3" in f.message


def test_the_loss_a_monitored_session_fetches_is_read_from_its_nested_result() -> None:
    import numpy as np

    from gpudiag.inprogram.sessions import _first_scalar

    # MonitoredTrainingSession runs {"caller": [train_op, loss, global_step], <hook>: ...}
    assert _first_scalar({"caller": [None, np.float32(0.25), np.int64(7)],
                          "hook": np.int64(7)}) == 0.25
    assert _first_scalar([None, np.int64(3)]) is None


def test_a_tf1_worker_s_local_steps_and_the_global_step_it_fetched_are_said() -> None:
    from gpudiag.records.run import Step, StepSeries

    spec = {"ps": ["127.0.0.1:3"], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    steps = [Step(i, 100.0 + i, 0.01, 1.0 / (i + 1)) for i in range(195)]
    loop = StepSeries("session", "Session.run #6 [GradientDescent, Mean:0, global_step:0]",
                      steps, facts={"global_step_first": 5, "global_step": 199})
    # a chief's hooks read the global step as often as its loop runs: the loop is the one
    # that fetched a loss
    hook = StepSeries("session", "Session.run #4 [global_step/add:0]",
                      [Step(i, 100.0 + i, 0.01, None) for i in range(195)])
    obs = ProcessObservation(pid=3, ppid=0, argv=[], start_env={}, sessions=[{}],
                             series=[hook, loop],
                             cluster_joins=[ClusterJoin("tf.distribute.Server", "worker", 1,
                                                        spec, "joined")])
    base = Finding("run.distribution", "ok", "no tf.distribute strategy created")
    f = run_ps.distribution(base, obs, {"worker-1": {"/device:CPU:0": 135}}, {})
    assert "worker-1 ran 195 local steps (Session.run #6), global step 199" in f.message
    assert f.evidence["steps"]["global_step_first"] == 5
    # no global_step fetched: skipped with the reason, never a number
    bare = replace(obs, series=[hook, replace(loop, facts={})])
    f = run_ps.distribution(base, bare, {"worker-1": {"/device:CPU:0": 135}}, {})
    assert "global step not observed (its runs fetched no global_step)" in f.message
    assert f.evidence["steps"]["global_step"] is None


def test_the_global_step_is_read_where_the_fetches_put_it() -> None:
    import numpy as np

    from gpudiag.inprogram.sessions import _fetch_names, _flat, global_step_position

    class Fetch:
        def __init__(self, name: str) -> None:
            self.name = name

    class Graph:
        def __init__(self, names: list[str]) -> None:
            self.names = names

        def get_collection(self, key: str) -> list[Fetch]:
            return [Fetch(n) for n in self.names] if key == "global_step" else []

    # MonitoredTrainingSession: {"caller": [train_op, loss, global_step], <hook>: read}
    fetches = {"caller": [Fetch("GradientDescent"), Fetch("Mean:0"), Fetch("global_step:0")],
               "hook": Fetch("global_step/read:0")}
    names = tuple(_fetch_names(fetches))
    at = global_step_position(names, Graph(["global_step:0"]))
    assert at == 2
    result = {"caller": [None, np.float32(0.5), np.int64(42)], "hook": np.int64(42)}
    assert int(_flat(result)[at]) == 42
    assert global_step_position(names, Graph([])) is None  # no global step in the graph
