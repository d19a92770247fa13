"""Verdicts of multi-worker runs (gpudiag/verdicts/cluster.py) with plain data."""

from __future__ import annotations

from typing import Any

import pytest

from gpudiag.verdicts import cluster as v


def task(name: str, *, attempt: int = 0, ok: bool = True, ended: str = "exit",
         exit_text: str = "exited with code 0", last_step: int | None = 40,
         started: bool = True, **extra: Any) -> dict[str, Any]:
    return {"task": name, "attempt": attempt, "role": "trainer", "ok": ok, "started": started,
            "formed": started, "last_step": last_step, "resumed_from": None, "ended": ended,
            "exit": exit_text, "error_type": None, "error": None, "stderr_tail": ["tail"],
            "listening": None, "stragglers": [], "lost_peers": [], **extra}


def row(config: str = "sync-2w-b32", *, outcome: str = "complete", n: int = 2,
        tasks: list[dict[str, Any]] | None = None, **extra: Any) -> dict[str, Any]:
    mode, _, batch = config.split("-")
    return {"config": config, "mode": mode, "n_workers": n, "batch_per_worker": int(batch[1:]),
            "outcome": outcome, "failed": [], "restarts_used": 0, "resumed_from": None,
            "form_timeout_s": 60.0, "timeout_s": 300.0, "stopped_within_s": None,
            "stragglers": [], "steps": 40, "device_kind": "gpu",
            "tasks": tasks if tasks is not None else [task(f"worker-{i}") for i in range(n)],
            "workers": [], "total_examples_per_s": None, "step_s": None,
            "comm_s_per_step": None, "final_loss": None, "eval_accuracy": None,
            "busy_fraction": None, **extra}


def workers(*rates: float, batch: int = 32) -> list[dict[str, Any]]:
    return [{"task": f"worker-{i}", "examples_per_s": r, "step_s_median": batch / r,
             "batch": batch, "communication_s_per_step": None} for i, r in enumerate(rates)]


def test_a_completed_run_is_ok_and_says_so() -> None:
    f = v.cluster_run(row())
    assert f.status == "ok"
    assert f.message == "sync-2w-b32: 2 workers formed a cluster and ran 40 steps"
    assert all("stderr_tail" not in t for t in f.evidence["tasks"])


def test_a_restart_names_the_lost_worker_and_where_it_resumed() -> None:
    tasks = [task("worker-0", ok=False, exit_text="exited with code 1", last_step=31),
             task("worker-1", ok=False, ended="killed-by-drill", exit_text="was killed by SIGKILL",
                  last_step=30),
             task("worker-0", attempt=1), task("worker-1", attempt=1)]
    f = v.cluster_run(row(tasks=tasks, failed=["worker-1", "worker-0"], restarts_used=1,
                          resumed_from=25))
    assert f.status == "ok"
    assert ("after worker-1 was killed by SIGKILL at step 30; worker-0 exited with code 1 at "
            "step 31, the cluster restarted (1 restart) and resumed from its backup at step 25"
            ) in f.message


def test_a_lost_worker_names_it_its_last_steps_and_its_stderr() -> None:
    tasks = [task("worker-0", ok=False, exit_text="exited with code 1", last_step=31),
             task("worker-1", ok=False, ended="killed-by-drill",
                  exit_text="was killed by SIGKILL", last_step=30, stderr_tail=["boom"])]
    f = v.cluster_run(row(outcome="task-failed", tasks=tasks, failed=["worker-1", "worker-0"],
                          stopped_within_s=10.4))
    assert f.status == "fail"
    assert f.message == ("sync-2w-b32: worker-1 was killed (SIGKILL, --fault drill) at step 30; "
                         "then worker-0 exited with code 1; every task had ended 10.4 s later "
                         "(last steps: worker-0 step 31, worker-1 step 30)")
    assert f.evidence["stderr_tail_of_failed"] == ["boom"]
    assert "--restarts" in f.advice


def test_a_cluster_that_never_formed_names_who_was_missing() -> None:
    tasks = [task("worker-0", last_step=None, formed=False, ended="stopped"),
             task("worker-1", started=False, last_step=None, ended="not-started")]
    f = v.cluster_run(row(outcome="never-formed", tasks=tasks, stragglers=["worker-1"],
                          form_timeout_s=15.0))
    assert f.status == "fail"
    assert f.message == ("sync-2w-b32: the cluster never formed within 15 s (worker-1 never "
                         "started; TensorFlow's coordination service was still waiting for "
                         "worker-1); every task was stopped")
    assert "task.index" in f.advice and "localhost" in f.advice


def test_a_timeout_gives_the_last_steps() -> None:
    f = v.cluster_run(row(outcome="timeout", timeout_s=30.0,
                          tasks=[task("worker-0", last_step=12, ended="stopped"),
                                 task("worker-1", last_step=11, ended="stopped")]))
    assert f.status == "fail" and "did not finish within 30 s" in f.message
    assert "worker-0 step 12, worker-1 step 11" in f.message


def test_scaling_sums_what_each_worker_measured() -> None:
    one = row("sync-1w-b32", n=1, workers=workers(1000.0), total_examples_per_s=1000.0)
    two = row("sync-2w-b32", workers=workers(900.0, 850.0), total_examples_per_s=1750.0,
              step_s=0.0376, comm_s_per_step=0.004)
    f = v.cluster_scaling("sync", 32, [one, two])
    assert f.status == "ok"
    assert f.message == ("sync, batch 32 per worker: 2 workers measured worker-0 900 + worker-1 "
                         "850 = 1,750 examples/s; 1 worker 1,000 examples/s (efficiency 0.88); "
                         "collective ops 4.00 ms of a 37.6 ms step (profiled steps)")
    assert f.evidence["efficiency"] == pytest.approx(0.875)


def test_scaling_on_shared_cpu_is_not_a_speedup_and_low_efficiency_warns() -> None:
    one = row("sync-1w-b32", n=1, workers=workers(1000.0), total_examples_per_s=1000.0)
    slow = row("sync-2w-b32", workers=workers(500.0, 500.0), total_examples_per_s=1000.0)
    shared = {**slow, "device_kind": "cpu", "shared_machine": True}
    assert "Not meaningful" in v.cluster_scaling("sync", 32, [one, shared]).message
    apart = {**shared, "shared_machine": False}  # CPU workers on separate machines do scale
    assert "Not meaningful" not in v.cluster_scaling("sync", 32, [one, apart]).message
    f = v.cluster_scaling("sync", 32, [one, slow])
    assert f.status == "warn" and "larger batch" in f.advice
    assert v.cluster_scaling("sync", 32, [one]).status == "skip"


def test_a_larger_batch_paying_off_is_said_with_the_numbers() -> None:
    rows = [row("sync-1w-b32", n=1, total_examples_per_s=1000.0),
            row("sync-2w-b32", total_examples_per_s=1200.0, step_s=0.05, comm_s_per_step=0.02),
            row("sync-1w-b128", n=1, total_examples_per_s=3000.0),
            row("sync-2w-b128", total_examples_per_s=5400.0, step_s=0.09, comm_s_per_step=0.02)]
    f = v.batch_payoff("sync", rows)
    assert f.message == ("sync: batch 32: efficiency 0.60, collectives 40 % of a step; batch "
                         "128: efficiency 0.90, collectives 22 % of a step: the larger batch "
                         "pays for the communication better (the all-reduce costs the same "
                         "per step whatever the batch)")
    assert v.batch_payoff("sync", rows[:2]).status == "skip"
    ps = v.batch_payoff("ps", [{**r, "mode": "ps"} for r in rows])
    assert "all-reduce" not in ps.message and "parameter servers" in ps.message


def test_sync_beside_ps_explains_the_trade_off_with_the_numbers() -> None:
    sync = row("sync-2w-b32", total_examples_per_s=1800.0, final_loss=0.40, eval_accuracy=0.93,
               step_s=0.036, comm_s_per_step=0.012)
    ps = row("ps-2w-b32", total_examples_per_s=2100.0, final_loss=0.45, eval_accuracy=0.91,
             busy_fraction=0.25)
    f = v.sync_vs_ps(sync, ps)
    assert f.status == "ok"
    assert f.message.startswith("2 workers, batch 32: sync 1,800 examples/s, final loss 0.400, "
                                "eval accuracy 0.93; ps 2,100 examples/s, final loss 0.450, "
                                "eval accuracy 0.91. ps was faster here (1.17x)")
    assert "12.0 ms of a 36.0 ms step" in f.message and "busy 25 % of the time" in f.message
    assert v.sync_vs_ps(sync, None).status == "skip"


def seen(entry_id: str, severity: str, tasks: list[str]) -> dict[str, Any]:
    return {"id": entry_id, "severity": severity, "meaning": "m.", "fix": "f.", "count": 2,
            "first": "the line", "tasks": tasks}


def test_tf_messages_become_findings_with_the_fix() -> None:
    found = v.tf_messages([seen("cluster-waiting-for-tasks", "info", ["a/worker-0"]),
                           seen("cluster-peer-unhealthy", "fail", ["a/worker-0"]),
                           seen("auto-shard-data", "info", ["b/worker-1"])],
                          never_formed=False, recovered=["b"])
    assert [(f.id, f.status) for f in found] == [
        ("cluster.tf-message.cluster-peer-unhealthy", "fail"),
        ("cluster.tf-message.auto-shard-data", "ok")]
    assert found[0].advice == "f." and "a/worker-0 (2x)" in found[0].message
    recovered = v.tf_messages([seen("cluster-peer-unhealthy", "fail", ["b/worker-0"])],
                              never_formed=False, recovered=["b"])
    assert recovered[0].status == "warn" and "The run recovered from it." in recovered[0].message
    clean = v.tf_messages([seen("cluster-peer-connection-lost", "fail", ["c/worker-1"])],
                          never_formed=False, completed=["c"])
    assert clean[0].status == "ok" and "every step completed" in clean[0].message
    waiting = v.tf_messages([seen("cluster-waiting-for-tasks", "info", ["a/worker-0"])],
                            never_formed=True)
    assert [f.status for f in waiting] == ["warn"]


def test_listening_on_every_interface_is_a_warning_when_tf_config_says_loopback() -> None:
    tasks = [{"task": "worker-0", "listening": ["[::]:41117"]},
             {"task": "worker-1", "listening": ["0.0.0.0:41118"]}]
    f = v.listening(tasks, tf_config_loopback=True)
    assert f.status == "warn" and "worker-0 [::]:41117; worker-1 0.0.0.0:41118" in f.message
    assert "TensorFlow binds 0.0.0.0" in f.message
    assert v.listening(tasks, tf_config_loopback=False).status == "ok"
    assert v.listening([{"task": "worker-0", "listening": ["127.0.0.1:5"]}], True).status == "ok"
    assert v.listening([{"task": "worker-0", "listening": None}], True).status == "skip"
