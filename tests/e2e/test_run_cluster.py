"""`gpudiag run` on a user's 2-worker MultiWorkerMirroredStrategy program, end to end.

The program is tests/programs/mwms_worker.py, written as the TensorFlow tutorial writes
one: TF_CONFIG from the environment, the strategy first, a custom loop. It runs three
ways a user runs it: both workers started by a launcher under one `gpudiag run`; each
worker under its own `gpudiag run` sharing one --logdir (as on two machines with a shared
filesystem); and worker 0 alone, which waits for worker 1 forever until the user stops it.
Loopback only; no GPU.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from helpers import REPO, TESTS_DIR, findings_by_id, gpudiag, load_report, process_alive, run_dirs

from gpudiag import layout
from gpudiag.records.tfconfig import free_ports

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"
SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())

pytestmark = pytest.mark.slow


def _report(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = load_report(run_dir)
    jsonschema.validate(report, SCHEMA)
    return report


def _cluster_dir(logdir: Path) -> Path:
    (found,) = [p for p in logdir.iterdir() if p.name.startswith(layout.RUN_CLUSTER_DIR_PREFIX)]
    return found


def _tf_config(ports: list[int], index: int) -> str:
    return json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                       "task": {"type": "worker", "index": index}})


def test_a_launcher_s_two_workers_are_reported_together_by_task(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, str(PROGRAMS / "mwms_launch.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "worker 0 final loss" in proc.stdout and "worker 1 final loss" in proc.stdout
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(_report(run_dir))

    cluster = found["run.cluster"]
    assert cluster["status"] == "ok", cluster["message"]
    assert cluster["message"].startswith(
        "MultiWorkerMirroredStrategy cluster of 2 task(s) (worker-0, worker-1); 2 seen")
    tasks = {t["task"]: t for t in cluster["evidence"]["tasks"]}
    assert set(tasks) == {"worker-0", "worker-1"}
    assert all(t["steps"] == 30 and t["joined"] == "joined" and t["exited"]
               for t in tasks.values())
    assert tasks["worker-0"]["pid"] != tasks["worker-1"]["pid"]
    # one set of findings per worker, named by its task, each with its own placement log
    for name in ("worker-0", "worker-1"):
        assert "task " + name in found[f"run.distribution.{name}"]["message"]
        assert "2 replica(s) in sync across the cluster, 1 here" in \
            found[f"run.distribution.{name}"]["message"]
        assert found[f"run.placement.{name}"]["status"] == "ok"
        assert found[f"run.learning.{name}"]["status"] == "ok"

    # only the coordination leader is traced (the profiler aborted other workers here)
    assert found["run.profile.worker-0"]["evidence"]["profile"]["status"] == "stopped"
    follower = found["run.profile.worker-1"]
    assert follower["status"] == "skip" and "free(): invalid pointer" in follower["message"]
    assert "only the coordination leader (worker-0) is traced" in follower["message"]
    assert "run.devices.p1" not in found
    # the other worker's devices are not this one's
    devices = found["run.devices.worker-0"]["evidence"]["devices"]
    assert devices["logical"] == ["/device:CPU:0"], devices
    assert devices["other_tasks"] == ["/job:worker/replica:0/task:1/device:CPU:0"]
    # the cluster's combined report beside the run
    combined = _report(_cluster_dir(logdir))
    assert [f["id"] for f in combined["findings"]] == ["run.cluster"]
    assert {t["run_dir"] for t in combined["data"]["tasks"]} == {str(run_dir.resolve())}


def test_two_runs_sharing_a_logdir_are_reported_together(tmp_path: Path) -> None:
    logdir = tmp_path / "shared"
    ports = free_ports(2)
    runs = [subprocess.Popen(
        [PY, "-m", "gpudiag", "run", "--json", "--logdir", str(logdir), "--", PY,
         str(PROGRAMS / "mwms_worker.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "TF_CONFIG": _tf_config(ports, i)})
        for i in (0, 1)]
    outs = [r.communicate(timeout=300) for r in runs]
    assert [r.returncode for r in runs] == [0, 0], [e[-2000:] for _, e in outs]
    reports = [json.loads(out) for out, _ in outs]
    run_dirs_seen = {r["run_dir"] for r in reports}
    assert len(run_dirs_seen) == 2 and len(run_dirs(logdir)) == 2
    # each run saw its own task, one process
    for i, r in enumerate(reports):
        found = findings_by_id(r)
        assert f"task worker-{i}" in found["run.distribution"]["message"]
        assert found["run.placement"]["status"] == "ok"
    # the run that ended last reports both tasks; the cluster's report holds both
    complete = [findings_by_id(r)["run.cluster"] for r in reports
                if findings_by_id(r)["run.cluster"]["status"] == "ok"]
    assert complete, [findings_by_id(r)["run.cluster"]["message"] for r in reports]
    assert "2 seen in logdir" in complete[0]["message"]
    combined = _report(_cluster_dir(logdir))
    (finding,) = combined["findings"]
    assert finding["status"] == "ok", finding["message"]
    tasks = {t["task"]: t for t in combined["data"]["tasks"]}
    assert set(tasks) == {"worker-0", "worker-1"}
    assert {t["run_dir"] for t in tasks.values()} == \
        {str(Path(d).resolve()) for d in run_dirs_seen}
    assert all(t["returncode"] == 0 and t["steps"] == 30 for t in tasks.values())
    task_files = sorted(p.name for p in (_cluster_dir(logdir) / "tasks").iterdir())
    assert [n.split("-")[:2] for n in task_files] == [["worker", "0"], ["worker", "1"]]


def test_a_cluster_that_never_forms_is_named_when_the_user_stops_the_run(
        tmp_path: Path) -> None:
    """Worker 0 alone waits for worker 1 forever; SIGTERM (a scheduler's cancel) stops
    gpudiag, which reports who was missing and leaves no process behind. TensorFlow's
    preemption notifier catches the SIGTERM passed on, so gpudiag has to kill it."""
    logdir = tmp_path / "runs"
    proc = subprocess.Popen(
        [PY, "-m", "gpudiag", "run", "--logdir", str(logdir), "--grace", "5", "--", PY,
         str(PROGRAMS / "mwms_worker.py")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL, text=True, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "TF_CONFIG": _tf_config(free_ports(2), 0)})

    def waiting() -> bool:
        stderr = [d / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME / layout.RUN_STDERR
                  for d in run_dirs(logdir)]
        return any(p.exists() and "Waiting for 1/2 tasks" in p.read_text() for p in stderr)

    deadline = time.monotonic() + 120
    while not waiting():
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        assert time.monotonic() < deadline, "worker 0 never said it was waiting"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + signal.SIGTERM, err[-2000:]
    (run_dir,) = run_dirs(logdir)
    report = _report(run_dir)
    found = findings_by_id(report)
    assert report["interrupted"] is True

    cluster = found["run.cluster"]
    assert cluster["status"] == "fail"
    assert "the cluster never formed: worker-0 waited for worker-1" in cluster["message"]
    assert "worker-1 never ran under gpudiag" in cluster["message"]
    assert cluster["evidence"]["stragglers"] == ["worker-1"]
    assert cluster["evidence"]["died"] == []
    assert "own task.index" in cluster["advice"]
    command = found["run.command"]["message"]
    assert "interrupted (SIGTERM)" in command and "so gpudiag killed it" in command
    assert found["run.crash"]["status"] == "ok"
    assert "tf-caught-sigterm" in report["data"]["run"]["catalogue_matches"]
    pid = cluster["evidence"]["tasks"][0]["pid"]
    assert not process_alive(pid)


def test_a_parameter_server_job_s_four_tasks_are_reported_together(tmp_path: Path) -> None:
    """1 ps and 2 workers serving (tf.distribute.Server(...).join()), the coordinator
    scheduling steps: the servers are tasks of the cluster, with no findings of their own;
    their connections closing as the launcher stops them are not failures (exit 0)."""
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY, str(PROGRAMS / "ps_launch.py"))
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "last loss" in proc.stdout
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(_report(run_dir))
    cluster = found["run.cluster"]
    assert cluster["status"] == "ok", cluster["message"]
    assert cluster["message"].startswith(
        "ParameterServerStrategy cluster of 4 task(s) (chief-0, ps-0, worker-0, worker-1)")
    vias = {t["task"]: t["via"] for t in cluster["evidence"]["tasks"]}
    assert vias == {"chief-0": "ParameterServerStrategy", "ps-0": "tf.distribute.Server",
                    "worker-0": "tf.distribute.Server", "worker-1": "tf.distribute.Server"}
    assert "ParameterServerStrategy" in found["run.distribution.chief-0"]["message"]
    assert not [k for k in found if k.endswith(("ps-0", "worker-0", "worker-1"))]
    assert found["run.tf-log"]["status"] != "fail", found["run.tf-log"]["message"]
