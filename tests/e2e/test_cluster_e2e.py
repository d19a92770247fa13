"""`gpudiag scaling --workers` end to end: real worker processes on 127.0.0.1, real
TensorFlow (MultiWorkerMirroredStrategy, ParameterServerStrategy), real faults.

Each run is a module-scoped fixture shared by its assertions (2 cores: every run
counts). Every run must leave no process behind: the tasks' pids are in the report.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import (
    breakdown_picture,
    findings_by_id,
    gpudiag,
    process_alive,
    read_scalars,
    run_dirs,
)

from gpudiag import layout
from gpudiag.cluster import messages

pytestmark = pytest.mark.slow

FAST = ["--model", "mlp", "--warmup-steps", "3", "--profile-steps", "2",
        "--histogram-every", "0"]
# the fault drills assert on no trace: their leader runs no profiler session
UNPROFILED = ["--model", "mlp", "--warmup-steps", "3", "--profile-steps", "0",
              "--histogram-every", "0"]
GONE_WITHIN_S = 12.0


def assert_no_task_left(report: dict[str, Any]) -> None:
    pids = [t["pid"] for c in report["data"]["cluster"]["configs"].values()
            for t in c["tasks"] if t["pid"]]
    assert pids
    deadline = time.monotonic() + GONE_WITHIN_S
    while any(process_alive(p) for p in pids):
        assert time.monotonic() < deadline, f"left running: {[p for p in pids if process_alive(p)]}"
        time.sleep(0.1)


def run(tmp_path_factory: pytest.TempPathFactory, name: str, *args: str,
        timeout: float = 400) -> tuple[int, dict[str, Any], Path, float]:
    logdir = tmp_path_factory.mktemp(name) / "runs"
    start = time.monotonic()
    proc = gpudiag("scaling", *args, "--json", "--logdir", str(logdir), timeout=timeout)
    wall = time.monotonic() - start
    assert proc.stdout, proc.stderr[-3000:]
    (run_dir,) = run_dirs(logdir)
    return proc.returncode, json.loads(proc.stdout), run_dir, wall


def worker_result(run_dir: Path, config: str, task: str, attempt: int = 0) -> dict[str, Any]:
    """What one worker's own process wrote (result.json), not what the chief gathered."""
    child = layout.child_path(run_dir, layout.task_child_name(config, task, attempt))
    payload = json.loads((child / layout.RESULT_JSON).read_text())
    assert payload["ok"], payload
    result: dict[str, Any] = payload["result"]
    return result


# ----------------------------------------------------------------------------- sync


@pytest.fixture(scope="module")
def sync(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "sync", "--workers", "2", "--steps", "40",
               "--batch-factor", "2", *FAST)


@pytest.mark.long("a real two-worker cluster formed and trained: the module's run, made here")
def test_sync_two_workers_complete_and_the_total_is_the_sum_of_what_each_measured(sync) -> None:
    code, report, run_dir, _ = sync
    assert code == 0, report["findings"]
    found = findings_by_id(report)
    for config in ("sync-1w-b32", "sync-2w-b32", "sync-1w-b64", "sync-2w-b64"):
        assert found[f"cluster.run.{config}"]["status"] == "ok"
    rows = {r["config"]: r for r in report["data"]["cluster"]["rows"]}
    two = rows["sync-2w-b32"]
    own = [worker_result(run_dir, "sync-2w-b32", f"worker-{i}")["own"] for i in (0, 1)]
    assert [w["examples_per_s"] for w in two["workers"]] == [o["examples_per_s"] for o in own]
    assert all(o["examples_per_s"] > 0 and o["timed_steps"] == 35 for o in own)
    assert two["total_examples_per_s"] == pytest.approx(sum(o["examples_per_s"] for o in own))
    scaling = found["cluster.scaling.sync-b32"]
    assert scaling["status"] == "warn" and "Not meaningful" in scaling["message"]
    assert f"= {two['total_examples_per_s']:,.0f} examples/s" in scaling["message"]
    assert found["cluster.batch.sync"]["status"] == "ok"
    assert found["cluster.nvml"]["status"] == "skip"
    assert two["comm_s_per_step"] > 0  # CollectiveReduceV2 in each worker's trace
    assert two["final_loss"] < 0.8 * 2.3026 and two["eval_accuracy"] > 0.5  # it learned
    assert_no_task_left(report)


def test_sync_steps_are_broken_down_from_the_leaders_trace_with_the_lost_speed_up(sync):
    _, report, run_dir, _ = sync
    found = findings_by_id(report)
    for batch in (32, 64):
        one = found[f"cluster.bottleneck.sync-1w-b{batch}"]
        two = found[f"cluster.bottleneck.sync-2w-b{batch}"]
        for f in (one, two):
            assert f["status"] in ("ok", "warn"), f
            assert f["evidence"]["steps_from"] == "host step markers"
            assert f["evidence"]["step_s"] > 0 and f["evidence"]["parts_s"]
            assert f["evidence"]["shares"]["compute"] > 0  # the trace's ops, on the host row
        # the all-reduce between the workers: CollectiveReduceV2 in the leader's trace
        assert two["evidence"]["shares"]["communication"] > 0
        assert one["evidence"]["shares"]["communication"] == 0
        assert "lost_speedup" not in one["evidence"]
        lost = two["evidence"]["lost_speedup"]
        assert lost["base_step_s"] == pytest.approx(one["evidence"]["step_s"])
        assert sum(lost["growth_s"].values()) == pytest.approx(lost["lost_s_per_step"],
                                                               abs=1e-9)
        assert f"on 1 worker (sync-1w-b{batch}), " in two["message"]
        assert "of 2x by the trace" in two["message"]
    _, _, _, text = breakdown_picture(run_dir)
    assert "cluster.bottleneck.sync-2w-b64" in text


def test_sync_tasks_talked_on_loopback_and_the_report_says_where_tensorflow_listened(sync):
    _, report, run_dir, _ = sync
    result = worker_result(run_dir, "sync-2w-b32", "worker-1")
    addresses = result["cluster"]["worker"]
    assert len(addresses) == 2 and all(a.startswith("127.0.0.1:") for a in addresses)
    listen = findings_by_id(report)["cluster.listen"]
    ports = [a.rpartition(":")[2] for a in addresses]
    assert listen["status"] == "warn" and all(f":{p}" in listen["message"] for p in ports)


def test_sync_chief_writes_the_combined_tensorboard_run(sync) -> None:
    _, report, run_dir, _ = sync
    chief = read_scalars(run_dir / "sync-2w-b32" / "worker-0")
    rows = {r["config"]: r for r in report["data"]["cluster"]["rows"]}
    total = chief[layout.TAG_CLUSTER_TOTAL_EXAMPLES_PER_S][-1].value
    assert total == pytest.approx(rows["sync-2w-b32"]["total_examples_per_s"], rel=1e-5)
    assert layout.worker_examples_per_s_tag(1) in chief and layout.TAG_TRAIN_LOSS in chief
    assert layout.TAG_EVAL_ACCURACY in chief
    assert layout.TAG_TRAIN_LOSS in read_scalars(run_dir / "sync-2w-b32" / "worker-1")
    parent = read_scalars(run_dir / layout.CLUSTER_TB_RUN)
    points = parent[layout.cluster_examples_per_s_tag("sync", 32)]
    assert [p.step for p in points] == [1, 2]
    assert not (run_dir / "sync-2w-b32" / layout.BACKUP_DIR / "worker-0").exists()


# ------------------------------------------------------------------------------- ps


@pytest.fixture(scope="module")
def ps(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "ps", "--workers", "2", "--mode", "ps", "--steps", "60",
               "--batch-factor", "1", *FAST)


def test_ps_one_ps_two_workers_and_a_coordinator_complete(ps) -> None:
    code, report, run_dir, _ = ps
    assert code == 0, report["findings"]
    found = findings_by_id(report)
    assert found["cluster.run.ps-2w-b32"]["status"] == "ok"
    config = report["data"]["cluster"]["configs"]["ps-2w-b32"]
    assert {t["task"] for t in config["tasks"]} == {"chief-0", "ps-0", "worker-0", "worker-1"}
    coordinator = worker_result(run_dir, "ps-2w-b32", "chief-0")
    assert coordinator["role"] == "coordinator" and coordinator["num_workers"] == 2
    stats = coordinator["workers"]
    assert [w["task"] for w in stats] == ["worker-0", "worker-1"]
    assert sum(w["steps"] for w in stats) == 60  # every step ran on one of them
    assert all(w["examples_per_s"] > 0 for w in stats)
    row = {r["config"]: r for r in report["data"]["cluster"]["rows"]}["ps-2w-b32"]
    assert row["total_examples_per_s"] == pytest.approx(sum(w["examples_per_s"] for w in stats))
    assert row["final_loss"] < 0.8 * 2.3026
    f = found["cluster.bottleneck.ps-2w-b32"]
    assert f["status"] == "skip" and "parameter-server mode runs no profiler" in f["message"]
    assert_no_task_left(report)


# --------------------------------------------------------------------------- faults


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "killed", "--workers", "2", "--steps", "400",
               "--fault", "kill:worker-1@12", *UNPROFILED)


def test_a_killed_worker_ends_the_run_in_bounded_time_naming_it(killed) -> None:
    code, report, run_dir, wall = killed
    assert code == 1
    f = findings_by_id(report)["cluster.run.sync-2w-b32"]
    assert f["status"] == "fail"
    assert f["message"].startswith("sync-2w-b32: worker-1 was killed (SIGKILL, --fault drill) "
                                   "at step ")
    tasks = {t["task"]: t for t in f["evidence"]["tasks"]}
    assert tasks["worker-1"]["ended"] == "killed-by-drill"
    assert tasks["worker-1"]["last_step"] >= 12 and tasks["worker-0"]["last_step"] >= 12
    assert f"worker-0 step {tasks['worker-0']['last_step']}" in f["message"]
    assert f["evidence"]["stderr_tail_of_failed"]  # the dead worker's last lines
    # the survivor learned of it from TensorFlow (heartbeats) and stopped by itself,
    # long before the 400 steps and well within the grace period
    assert tasks["worker-0"]["ended"] == "exit" and tasks["worker-0"]["last_step"] < 400
    assert f["evidence"]["stopped_within_s"] < 30
    survivor = (run_dir / "children" / "sync-2w-b32-worker-0" / "stderr.txt").read_text()
    assert messages.lost_peers(survivor) == ["worker-1"]  # TensorFlow named the dead one
    tasks_seen = [f for f in report["findings"] if f["id"] in (
        "cluster.tf-message.cluster-peer-unhealthy",
        "cluster.tf-message.cluster-peer-connection-lost")]
    assert tasks_seen and all(f["status"] == "fail" for f in tasks_seen)
    assert wall < 120
    assert_no_task_left(report)


@pytest.fixture(scope="module")
def restarted(tmp_path_factory: pytest.TempPathFactory,
              ) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "restarted", "--workers", "2", "--steps", "40",
               "--batch-factor", "1", "--fault", "kill:worker-1@30", "--restarts", "1",
               *UNPROFILED)


def test_a_restarted_cluster_resumes_from_its_backups_and_completes(restarted, sync) -> None:
    code, report, run_dir, _ = restarted
    assert code == 0, report["findings"]
    f = findings_by_id(report)["cluster.run.sync-2w-b32"]
    assert f["status"] == "ok" and "resumed from its backup at step 25" in f["message"]
    for i in (0, 1):
        again = worker_result(run_dir, "sync-2w-b32", f"worker-{i}", attempt=1)
        assert again["resumed_from"] == 25 and again["own"]["first_step"] == 25
        assert again["own"]["last_step"] == 40
    stdout = (layout.child_path(run_dir, "sync-2w-b32-worker-1-restart1")
              / layout.STDOUT_TXT).read_text()
    assert layout.cluster_line(layout.CLUSTER_RESUMED, "25") in stdout
    assert layout.parse_step_line(stdout.splitlines()[2]).step == 26
    # same data, same weights at step 25: the resumed run ends where an uninterrupted one does
    sync_dir = sync[2]
    whole = worker_result(sync_dir, "sync-2w-b32", "worker-0")
    resumed = worker_result(run_dir, "sync-2w-b32", "worker-0", attempt=1)
    assert resumed["losses"][-1] == pytest.approx(whole["losses"][-1], rel=1e-3)
    warned = [f for f in report["findings"] if f["id"].startswith("cluster.tf-message.")]
    assert warned and all(f["status"] == "warn" and "recovered" in f["message"]
                          for f in warned)
    assert_no_task_left(report)


@pytest.fixture(scope="module")
def absent(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "absent", "--workers", "2", "--steps", "40",
               "--fault", "absent:worker-1", "--form-timeout", "10", *FAST)


def test_a_worker_that_never_starts_is_named_and_nothing_hangs(absent) -> None:
    """worker-1 never starts. Whether worker-0's TensorFlow got as far as its coordination
    service's "still waiting" line within the 10 s depends on the machine's load (with both
    cores busy it had not); the finding says exactly what was seen either way."""
    code, report, _, wall = absent
    assert code == 1
    found = findings_by_id(report)
    f = found["cluster.run.sync-2w-b32"]
    waiting = found.get("cluster.tf-message.cluster-waiting-for-tasks")
    said = ("; TensorFlow's coordination service was still waiting for worker-1"
            if waiting is not None else "")
    assert f["status"] == "fail" and f["message"] == (
        f"sync-2w-b32: the cluster never formed within 10 s (worker-1 never started{said}); "
        "every task was stopped")
    assert waiting is None or waiting["status"] == "warn"
    assert wall < 60
    assert_no_task_left(report)


@pytest.fixture(scope="module")
def ps_killed(tmp_path_factory: pytest.TempPathFactory,
              ) -> tuple[int, dict[str, Any], Path, float]:
    return run(tmp_path_factory, "ps_killed", "--workers", "2", "--mode", "ps", "--steps", "150",
               "--batch-factor", "1", "--fault", "kill:worker-1@40", "--restarts", "1", *FAST)


def test_ps_goes_on_without_a_killed_worker_and_its_server_is_restarted(ps_killed) -> None:
    code, report, run_dir, _ = ps_killed
    assert code == 0, report["findings"]
    f = findings_by_id(report)["cluster.run.ps-2w-b32"]
    assert f["status"] == "ok" and "worker-1 was killed by SIGKILL at step " in f["message"]
    assert "the coordinator went on with the other workers" in f["message"]
    tasks = [(t["task"], t["attempt"], t["ended"])
             for t in report["data"]["cluster"]["configs"]["ps-2w-b32"]["tasks"]]
    assert ("worker-1", 0, "killed-by-drill") in tasks and ("worker-1", 1, "stopped") in tasks
    coordinator = worker_result(run_dir, "ps-2w-b32", "chief-0")
    steps = {w["task"]: w["steps"] for w in coordinator["workers"]}
    # a step whose outputs died with worker-1 before the coordinator fetched them still ran
    assert sum(steps.values()) + coordinator["lost_outputs"] == 150
    assert steps["worker-0"] > steps["worker-1"]
    assert_no_task_left(report)
