"""`gpudiag worker` as on a real cluster, here on 127.0.0.1: one gpudiag per task, each
with its own TF_CONFIG, or with a Slurm job step's variables (TensorFlow's
SlurmClusterResolver resolves them); the chief writes the combined report."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, findings_by_id, load_report, read_scalars, run_dirs

from gpudiag import layout
from gpudiag.records import tfconfig

pytestmark = pytest.mark.slow

FAST = ["--model", "mlp", "--steps", "30", "--warmup-steps", "3", "--profile-steps", "2",
        "--form-timeout", "60"]


def start(logdir: Path, env: dict[str, str], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "worker", *FAST, *args, "--logdir", str(logdir)],
        env={**os.environ, "PYTHONPATH": str(REPO), **env}, cwd=REPO, text=True,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(procs: list[subprocess.Popen[str]], timeout_s: float = 240) -> list[int]:
    codes = []
    for p in procs:
        try:
            p.communicate(timeout=timeout_s)
        finally:
            if p.poll() is None:
                p.kill()
                p.communicate()
        codes.append(p.returncode)
    return codes


def gone(report: dict[str, Any]) -> bool:
    pids = [t["pid"] for c in report["data"]["cluster"]["configs"].values()
            for t in c["tasks"] if t["pid"]]
    deadline = time.monotonic() + 12
    while time.monotonic() < deadline:
        if not any(Path(f"/proc/{p}").exists()
                   and Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
                   for p in pids):
            return True
        time.sleep(0.1)
    return False


SLURM_ENV = {"SLURM_STEP_NUM_TASKS": "2", "SLURM_STEP_NODELIST": "localhost",
             "SLURM_STEP_TASKS_PER_NODE": "2", "TF_CONFIG": ""}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[Path], int]:
    """One two-task cluster, each task found its own way: worker-0 from the TF_CONFIG it
    is given, worker-1 from a Slurm job step's variables (--slurm: TensorFlow's
    SlurmClusterResolver, both tasks on one node, localhost, ports from --slurm-port-base);
    worker-0's TF_CONFIG names the addresses the resolver gives. Its logdirs and the base
    port."""
    base = _two_free_ports()
    logdirs = [tmp_path_factory.mktemp(f"machine{i}") / "runs" for i in (0, 1)]
    chief = json.dumps({"cluster": {"worker": [f"localhost:{base}", f"localhost:{base + 1}"]},
                        "task": {"type": "worker", "index": 0}})
    procs = [start(logdirs[0], {"TF_CONFIG": chief}),
             start(logdirs[1], {**SLURM_ENV, "SLURM_PROCID": "1"}, "--slurm",
                   "--slurm-port-base", str(base))]
    assert finish(procs) == [0, 0]
    return logdirs, base


def test_each_task_runs_its_part_and_the_chief_reports_every_worker(cluster) -> None:
    logdirs, _ = cluster
    (chief_run,) = run_dirs(logdirs[0])
    chief = load_report(chief_run)
    found = findings_by_id(chief)
    assert found["cluster.run.worker-0"]["status"] == "ok"
    scaling = found["cluster.scaling.sync-b32"]
    workers = scaling["evidence"]["rows"][0]["workers"]
    assert [w["task"] for w in workers] == ["worker-0", "worker-1"]
    total = scaling["evidence"]["rows"][0]["total_examples_per_s"]
    assert total == pytest.approx(sum(w["examples_per_s"] for w in workers))
    (other_run,) = run_dirs(logdirs[1])
    other = findings_by_id(load_report(other_run))
    own = other["cluster.worker.worker-1"]
    assert own["status"] == "ok" and own["evidence"]["examples_per_s"] == pytest.approx(
        workers[1]["examples_per_s"])  # what worker-1 measured is what the chief received
    assert "cluster.scaling.sync-b32" not in other
    scalars = read_scalars(chief_run / "worker-0")
    assert scalars[layout.TAG_CLUSTER_TOTAL_EXAMPLES_PER_S][-1].value == pytest.approx(
        total, rel=1e-5)
    assert layout.worker_examples_per_s_tag(1) in scalars
    assert not (logdirs[0] / layout.WORKER_BACKUP_DIR).exists()
    assert gone(chief) and gone(load_report(other_run))


def test_a_lone_task_reports_who_it_waited_for(tmp_path: Path) -> None:
    """worker-1 alone: what it says depends on nobody answering, not on how far its
    TensorFlow got, so its form timeout is short."""
    cluster = tfconfig.local_cluster("sync", 2, 0)
    tasks = tfconfig.tasks_of(cluster)
    logdir = tmp_path / "runs"
    proc = start(logdir, {"TF_CONFIG": tasks[1].to_json()}, "--form-timeout", "3")
    assert finish([proc], 120) == [1]
    (run,) = run_dirs(logdir)
    report = load_report(run)
    f = findings_by_id(report)["cluster.run.worker-1"]
    assert f["status"] == "fail"
    assert f["message"] == (f"worker-1: the cluster did not form within 3 s: this task "
                            f"(worker-1 at {tasks[1].address}) got no answer from the "
                            f"cluster's leader worker-0 at {tasks[0].address}, or not every "
                            "task joined; the task was stopped")
    assert gone(report)


def test_a_task_stopped_while_it_waits_says_so_in_its_report(tmp_path: Path) -> None:
    """worker-1 alone, stopped by SIGTERM while it waits for its leader: the report is
    finished, interrupted, and its task's finding says when it was stopped and for whom it
    waited (before, the report had no finding at all); no process is left."""
    cluster = tfconfig.local_cluster("sync", 2, 0)
    tasks = tfconfig.tasks_of(cluster)
    logdir = tmp_path / "runs"
    proc = start(logdir, {"TF_CONFIG": tasks[1].to_json()}, "--form-timeout", "120")
    assert proc.stdout is not None
    said = ""
    while "waiting for the cluster" not in said:  # gpudiag's own line, once the task started
        line = proc.stdout.readline()
        assert line, said
        said += line
    proc.send_signal(signal.SIGTERM)
    assert finish([proc], 60) == [128 + signal.SIGTERM]
    (run,) = run_dirs(logdir)
    report = load_report(run)
    assert report["interrupted"] is True and report["data"]["interrupted_by"] == "SIGTERM"
    f = findings_by_id(report)["cluster.run.worker-1"]
    assert f["status"] == "skip"
    assert re.fullmatch(r"worker-1: stopped by SIGTERM after \d+\.\d s, while it waited for "
                        rf"the cluster to form \(its leader worker-0 at "
                        rf"{re.escape(tasks[0].address)}\)", f["message"]), f["message"]
    assert f["evidence"]["step"] == 0 and f["evidence"]["signal"] == "SIGTERM"


def test_slurm_allocation_resolved_by_tensorflow_forms_the_cluster(cluster) -> None:
    """worker-1 of the module's cluster: a Slurm step's task (localhost), its port from
    --slurm-port-base; it formed the cluster with worker-0."""
    logdirs, base = cluster
    (run,) = run_dirs(logdirs[1])
    task = load_report(run)["data"]["cluster_task"]
    assert task["slurm"] is True and task["task"] == "worker-1"
    assert task["tf_config"] == {"cluster": {"worker": [f"localhost:{base}",
                                                        f"localhost:{base + 1}"]},
                                 "task": {"type": "worker", "index": 1}}
    (chief_run,) = run_dirs(logdirs[0])
    chief = findings_by_id(load_report(chief_run))
    assert chief["cluster.run.worker-0"]["status"] == "ok"
    assert json.dumps(chief["cluster.scaling.sync-b32"]["evidence"]).count("worker-1") >= 1


def _two_free_ports() -> int:
    """A port p with p and p + 1 both free on loopback (SlurmClusterResolver's layout)."""
    for _ in range(50):
        (p,) = tfconfig.free_ports(1)
        if p >= 65535:
            continue
        try:
            with socket.socket() as s:
                s.bind(("127.0.0.1", p + 1))
        except OSError:
            continue
        return p
    raise AssertionError("no two consecutive free ports")


def test_two_tasks_given_the_same_index_are_told_why(tmp_path: Path) -> None:
    """A wrong task index: both processes say worker 0. The second cannot bind worker 0's
    port and ends at once; the first waits for a worker 1 that never comes.

    The first task's part is what it holds: worker 0's port, here held by the test itself
    (a listening socket on 0.0.0.0, as TensorFlow's server binds it), so the second ends
    as soon as it tries, without a first task waiting out its form timeout meanwhile. Then
    the first runs, as it would have, alone: its form timeout computed from what the
    second took, start to end, under this machine's load (twice that, at least 10 s): time
    for its server to start and its coordination service to name who it waits for."""
    cluster = tfconfig.local_cluster("sync", 2, 0)
    first = tfconfig.tasks_of(cluster)[0]
    port = first.address.rpartition(":")[2]
    logdirs = [tmp_path / "a", tmp_path / "b"]
    with socket.socket() as held:
        held.bind(("0.0.0.0", int(port)))
        held.listen()
        began = time.monotonic()
        b = start(logdirs[1], {"TF_CONFIG": first.to_json()}, "--form-timeout", "20")
        assert finish([b], 120) == [1]
        took = time.monotonic() - began
    second = findings_by_id(load_report(run_dirs(logdirs[1])[0]))
    ended = second["cluster.run.worker-0"]
    # it ended by itself, at once: never said to have waited out its 20 s form timeout
    assert ended["status"] == "fail" and ended["title"] == \
        "the task ended before the cluster formed", ended
    assert ended["message"].startswith("worker-0: the task ended by itself after ") and \
        "within 20 s" not in ended["message"], ended["message"]
    in_use = second["cluster.tf-message.grpc-port-in-use"]
    assert in_use["status"] == "fail" and f"0.0.0.0:{port}" in in_use["message"]
    assert "task.index" in in_use["advice"]
    a = start(logdirs[0], {"TF_CONFIG": first.to_json()},
              "--form-timeout", str(max(10, math.ceil(2 * took))))
    assert finish([a], 240) == [1]
    lone = findings_by_id(load_report(run_dirs(logdirs[0])[0]))
    assert "still waiting for worker-1" in lone["cluster.run.worker-0"]["message"]
