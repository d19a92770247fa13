"""The verdict on a user's multi-worker program's tasks together (gpudiag.verdicts.run.cluster):
each rule on TaskReports as gpudiag.run.tasks builds them."""

from __future__ import annotations

from dataclasses import replace

from gpudiag.records.run import TaskReport
from gpudiag.verdicts.run import cluster as run_cluster
from gpudiag.verdicts.run import cluster_tasks

SPEC = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}


def task(index: int, *, start: float = 100.0, end: float = 160.0, pid: int | None = None,
         host: str = "node-a", spec: dict[str, list[str]] | None = None,
         **fields: object) -> TaskReport:
    base = TaskReport(
        task_type="worker", task_id=index, cluster_key="k", cluster_spec=spec or SPEC,
        via="MultiWorkerMirroredStrategy", joined="joined", host=host,
        pid=pid or 1000 + index, run_dir=f"/runs/r{index}", started_unix_s=start,
        ended_unix_s=end, exited=True, interrupted=False, returncode=0,
        loop="tf.function step", steps=30, step_s_median=0.004, examples_per_s=None,
        first_loss=1.5, last_loss=0.9)
    return replace(base, **fields)  # type: ignore[arg-type]


def test_every_task_seen_and_trained_is_ok_and_sums_what_each_measured() -> None:
    f = run_cluster.cluster([task(0, examples_per_s=1000.0), task(1, examples_per_s=900.0)])
    assert f.status == "ok"
    assert "MultiWorkerMirroredStrategy cluster of 2 task(s) (worker-0, worker-1)" in f.message
    assert "together 1,900 examples/s" in f.message
    assert f.evidence["formed"] is True and f.evidence["missing"] == []


def test_a_cluster_that_never_formed_names_the_task_it_waited_for() -> None:
    f = run_cluster.cluster([task(0, joined="waiting", exited=False, interrupted=True,
                                  returncode=-9, steps=0, stragglers=["worker-1"])])
    assert f.status == "fail"
    assert "never formed: worker-0 waited for worker-1" in f.message
    assert "worker-1 never ran under gpudiag" in f.message
    assert f.evidence["died"] == []  # stopped with the interrupted run: not a death
    assert "task.index" in f.advice


def test_two_processes_running_one_task_at_once_is_a_duplicate_not_a_restart() -> None:
    f = run_cluster.cluster([task(0), task(1), task(0, pid=2000, start=110.0, end=150.0)])
    assert f.status == "fail" and "the same task ran twice at once: worker-0" in f.message
    assert "task.index" in f.advice


def test_a_task_run_again_after_the_first_ended_is_a_restart_and_the_latest_counts() -> None:
    first = task(1, end=120.0, exited=False, returncode=None, steps=12)
    again = task(1, pid=3000, start=125.0, end=170.0, steps=30)
    f = run_cluster.cluster([task(0, end=175.0), first, again])
    assert f.status == "ok" and "restarted: worker-1 x1" in f.message
    assert f.evidence["tasks"][1]["pid"] == 3000


def test_a_dead_task_is_named_with_the_steps_everyone_reached() -> None:
    f = run_cluster.cluster([
        task(0, steps=14, crash=None, lost_peers=["worker-1"], exited=True, returncode=1),
        task(1, steps=10, exited=False, returncode=None)])
    assert f.status == "fail"
    assert "worker-1 died (killed: no exit, no Python exception) after 10 step(s)" in f.message
    assert "worker-0 step 14" in f.message and "TensorFlow reported lost: worker-1" in f.message
    assert "BackupAndRestore" in f.advice


def test_a_server_ended_by_a_signal_is_how_servers_end_not_a_death() -> None:
    spec = {"chief": ["h:1"], "worker": ["h:2"], "ps": ["h:3"]}
    chief = replace(task(0, spec=spec), task_type="chief", via="ParameterServerStrategy")
    worker = replace(task(0, spec=spec, exited=False, returncode=-15), via="tf.distribute.Server",
                     steps=0, loop=None)
    ps = replace(task(0, spec=spec, exited=False, returncode=None), task_type="ps",
                 via="tf.distribute.Server", steps=0, loop=None)
    f = run_cluster.cluster([chief, worker, ps])
    assert f.status == "ok", f.message
    assert f.message.startswith("ParameterServerStrategy cluster of 3 task(s)")
    assert "ps-0 (pid 1000 on node-a, served (no loop of its own)" in f.message


def test_localhost_in_tf_config_across_machines_fails() -> None:
    f = run_cluster.cluster([task(0, host="node-a"), task(1, host="node-b")])
    assert f.status == "fail" and "ran on 2 machines (node-a, node-b)" in f.message
    assert "not localhost" in f.advice


def test_tasks_not_seen_after_the_cluster_formed_are_a_warning() -> None:
    f = run_cluster.cluster([task(1)], scope="logdir /shared")
    assert f.status == "warn"
    assert "worker-0 not seen in logdir /shared (the cluster formed, so they ran)" in f.message


def test_a_task_outside_the_cluster_spec_fails() -> None:
    f = run_cluster.cluster([task(0), task(1), task(2)])
    assert f.status == "fail" and "worker-2 is not in the cluster spec" in f.message


def test_same_job_keeps_the_tasks_that_overlap_this_run_and_leaves_earlier_runs_out() -> None:
    old = [task(0, start=0.0, end=50.0, pid=1), task(1, start=0.0, end=50.0, pid=2)]
    mine = task(0, start=100.0, end=160.0)
    other = task(1, start=105.0, end=170.0)
    late_restart = task(1, start=165.0, end=200.0, pid=9)  # overlaps only through `other`
    job, earlier = run_cluster.same_job([*old, mine, other, late_restart], [mine])
    assert [t.pid for t in job] == [1000, 1001, 9] and [t.pid for t in earlier] == [1, 2]


def test_each_task_s_gpus_from_its_machine_s_nvml_are_in_the_report() -> None:
    gpu = {"index": 1, "name": "H100", "util_p95_percent": 87.0,
           "peak_memory_used_bytes": 2**30, "this_process": True}
    f = run_cluster.cluster([task(0, gpus=[gpu]), task(1, gpus=[])])
    assert "worker-0 (pid 1000 on node-a, 30 steps, median 4.0 ms/step, on GPU 1 p95 87 %, " \
        in f.message
    assert "worker-1 (pid 1001 on node-a, 30 steps, median 4.0 ms/step, no GPU in use by it " \
        "(NVML)" in f.message
    assert f.evidence["tasks"][0]["gpus"] == [gpu]


PS_SPEC = {"worker": ["127.0.0.1:2222", "127.0.0.1:2223"], "ps": ["127.0.0.1:2224"]}


def _in_process(task_type: str, index: int, via: str) -> TaskReport:
    return replace(task(index, spec=PS_SPEC, pid=500, steps=0, loop=None, first_loss=None,
                        last_loss=None, step_s_median=None, run_dir="/runs/r"),
                   task_type=task_type, via=via, in_process=True,
                   ops_by_task={"worker-0": {"/device:CPU:0": 40},
                                "worker-1": {"/device:CPU:0": 38},
                                "ps-0": {"/device:CPU:0": 90}},
                   variables_by_task={"ps-0": 5})


def test_an_in_process_parameter_server_cluster_s_coordinator_is_not_outside_the_spec() -> None:
    """The tutorial's cluster: the spec names the workers and ps only; TensorFlow adds the
    coordinator's job (chief) itself. One process serves every task."""
    tasks = [_in_process("worker", 0, cluster_tasks.SERVER),
             _in_process("worker", 1, cluster_tasks.SERVER),
             _in_process("ps", 0, cluster_tasks.SERVER),
             _in_process("chief", 0, cluster_tasks.PSS)]
    f = run_cluster.cluster(tasks)
    assert f.status == "ok", f.message
    assert f.evidence["unknown"] == [] and f.evidence["missing"] == []
    assert f.evidence["coordinator_added_by_tensorflow"] == ["chief-0"]
    assert "asynchronous" in f.message and "in-process: pid 500" in f.message
    # counted once although every task of the run carries the run's counts
    assert f.evidence["ops_by_task"]["ps-0"] == {"/device:CPU:0": 90}
    assert "variables created on: ps-0 5" in f.message


def test_a_task_outside_the_spec_is_still_named_when_it_is_not_a_coordinator() -> None:
    f = run_cluster.cluster([task(0), task(1), replace(task(0), task_type="evaluator")])
    assert f.status == "fail" and "evaluator-0 is not in the cluster spec" in f.message


TF1_SPEC = {"ps": ["127.0.0.1:2224"], "worker": ["127.0.0.1:2222", "127.0.0.1:2223"]}


def _tf1(task_type: str, index: int, **fields: object) -> TaskReport:
    base = replace(task(index, spec=TF1_SPEC, run_dir=f"/runs/{task_type}{index}"),
                   task_type=task_type, via=cluster_tasks.SERVER,
                   sessions=2 if task_type == "worker" else 0,
                   variables_by_task={"ps-0": 3})
    return replace(base, **fields)  # type: ignore[arg-type]


def test_tf1_between_graph_replication_is_named_so_async_or_sync_and_variables_once() -> None:
    tasks = [_tf1("ps", 0, steps=0), _tf1("worker", 0), _tf1("worker", 1)]
    f = run_cluster.cluster(tasks)
    assert f.status == "ok", f.message
    assert f.message.startswith("between-graph replication (tf.compat.v1, no "
                                "tf.distribute strategy) cluster of 3 task(s)")
    assert "ParameterServerStrategy" not in f.message
    assert f.evidence["mode"] == "asynchronous" and "asynchronous" in f.message
    # each worker's graph placed the same 3 ps variables: 3, not 6
    assert f.evidence["variables_by_task"] == {"ps-0": 3}
    sync = run_cluster.cluster([replace(t, sync_replicas=True) for t in tasks])
    assert sync.evidence["mode"] == "synchronous" and "SyncReplicasOptimizer" in sync.message


def test_a_tf1_worker_whose_session_never_started_is_a_fail_not_ok_with_one_step() -> None:
    stuck = _tf1("worker", 1, steps=1, exited=False, interrupted=True, returncode=-15,
                 waiting_for=["worker-0"], waiting_lines=3)
    f = run_cluster.cluster([_tf1("ps", 0, steps=0), _tf1("worker", 0), stuck])
    assert f.status == "fail"
    assert "worker-1 never trained: it waited for worker-0" in f.message
    assert " 1 step" not in f.message and f.evidence["never_trained"] == ["worker-1"]
    assert "device_filters" in f.advice


def test_a_sync_chief_that_ends_minutes_after_its_last_step_is_explained() -> None:
    chief = _tf1("worker", 0, sync_replicas=True, last_step_end_unix_s=130.0, ended_unix_s=252.0)
    other = _tf1("worker", 1, sync_replicas=True, last_step_end_unix_s=130.0, ended_unix_s=131.0)
    f = run_cluster.cluster([_tf1("ps", 0, steps=0, sync_replicas=True), chief, other])
    assert f.status == "warn", f.message
    assert "worker-0 ended 122 s after its last step" in f.message
    assert "worker-1 ended" not in f.message
    assert "stop_grace_period_secs" in f.advice
    # asynchronous: said in the task's line, not a warning
    f = run_cluster.cluster([_tf1("ps", 0, steps=0),
                             replace(chief, sync_replicas=False), other])
    assert f.status == "ok" and "worker-0 (pid 1000 on node-a, ended 122 s after" not in \
        f.message and "ended 122 s after its last step" in f.message


def test_each_worker_s_local_steps_beside_the_global_step_it_saw() -> None:
    spec = {"ps": ["127.0.0.1:3"], "worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    ps = task(0, spec=spec, task_type="ps", via="tf.distribute.Server", steps=0, pid=900,
              loop=None, first_loss=None, last_loss=None)
    w0 = task(0, spec=spec, via="tf.distribute.Server", sessions=2, steps=6, global_step=200)
    w1 = task(1, spec=spec, via="tf.distribute.Server", sessions=2, steps=195,
              global_step=199)
    f = run_cluster.cluster([ps, w0, w1])
    assert f.status == "ok", f.message
    assert "worker-0 (pid 1000 on node-a, 6 local steps, global step 200" in f.message
    assert "worker-1 (pid 1001 on node-a, 195 local steps, global step 199" in f.message
    assert f.evidence["steps_by_task"] == {
        "worker-0": {"local_steps": 6, "global_step": 200},
        "worker-1": {"local_steps": 195, "global_step": 199}}
    # a worker whose runs fetched no global step: the reason, not a number
    f = run_cluster.cluster([ps, w0, replace(w1, global_step=None)])
    assert "195 local steps, global step not observed" in f.message
    assert f.evidence["steps_by_task"]["worker-1"]["global_step_skipped"] == \
        "its Session runs fetched no global_step"


def test_a_coordinator_s_fit_says_the_steps_it_dispatched_and_optimizer_iterations() -> None:
    spec = {"ps": ["127.0.0.1:3"], "worker": ["127.0.0.1:1"]}
    chief = task(0, spec=spec, task_type="chief", via="ParameterServerStrategy",
                 loop="Model.fit", steps=100, global_step=100)
    f = run_cluster.cluster([chief])
    assert "coordinator: dispatched 100 steps of Model.fit to the workers, global step 100 " \
           "(optimizer.iterations)" in f.message
    row = f.evidence["steps_by_task"]["chief-0"]
    assert row["dispatched_steps"] == 100 and row["local_steps"] is None
    assert "not recorded" in row["per_worker"]


def test_servers_with_no_strategy_and_no_session_are_never_called_parameter_server_strategy(
        ) -> None:
    """A TF1 job's ps (server.join()) and workers that ended before their Session (or ran
    none): only tf.distribute.Servers were seen. ParameterServerStrategy is TF2's
    coordinator API, which none of them created."""
    tasks = [_tf1("ps", 0, steps=0), _tf1("worker", 0, steps=0, sessions=0),
             _tf1("worker", 1, steps=0, sessions=0)]
    f = run_cluster.cluster(tasks)
    assert "ParameterServerStrategy" not in f.message, f.message
    assert f.evidence["kind"] == cluster_tasks.SERVERS_ONLY
    assert f.message.startswith("tf.distribute.Server (tf.compat.v1.train.Server) tasks, no "
                                "strategy and no Session seen cluster of 3 task(s)")


def test_a_crash_before_any_step_is_the_crash_s_not_the_cluster_s_and_after_a_step_it_is(
        ) -> None:
    """An in-process PS program (one pid serves every task) that crashed before its first
    step: skip naming the crash. The same crash after a step is a task that died."""
    spec = {"worker": ["127.0.0.1:1"], "ps": ["127.0.0.1:2"]}
    crash = "AttributeError: module 'keras.utils' has no attribute 'experimental'"
    served = [task(0, spec=spec, pid=7, via="tf.distribute.Server", steps=0, exited=False,
                   in_process=True),
              replace(task(0, spec=spec, pid=7, via="tf.distribute.Server", steps=0,
                           exited=False, in_process=True), task_type="ps")]
    chief = replace(task(0, spec=spec, pid=7, via="ParameterServerStrategy", steps=0,
                         crash=crash, returncode=1), task_type="chief")
    f = run_cluster.cluster([*served, chief])
    assert f.status == "skip", f.message
    assert f.message.startswith("the program crashed before it used its cluster (no task "
                                f"ran a step): chief-0 {crash}")
    later = run_cluster.cluster([*served, replace(chief, steps=3)])
    assert later.status == "fail" and "chief-0 died" in later.message


def test_workers_that_formed_their_cluster_and_died_are_judged_not_skipped() -> None:
    """Issue 37: a MultiWorkerMirroredStrategy job whose two workers both died of the same
    exception inside fit, before a step, got run.cluster skip ("crashed before it used its
    cluster"). The strategy had formed the cluster: both died, of this."""
    crash = "ValueError: Shapes (None, 1) and (None, 10) are incompatible"
    both = [task(i, steps=0, crash=crash, returncode=1) for i in range(2)]
    f = run_cluster.cluster(both)
    assert f.status == "fail", f.message
    assert f.message.startswith("every task died, of the same exception: worker-0, worker-1 "
                                f"({crash}) after 0 step(s) each")
    assert f.evidence["died"] == ["worker-0", "worker-1"]
    assert "crashed_before_use" not in f.evidence
    # different exceptions: each named
    other = run_cluster.cluster([both[0], replace(both[1], crash="KeyError: 'x'")])
    assert other.status == "fail" and "worker-0 died (ValueError" in other.message
    assert "worker-1 died (KeyError: 'x')" in other.message
