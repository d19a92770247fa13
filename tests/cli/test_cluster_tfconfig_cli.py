"""TF_CONFIG checked before anything starts: pure cases, then the real CLI (exit 2, one
line, nothing written), and the cluster modules stay TF-free."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import REPO, assert_usage_error, gpudiag

TWO = {"worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}


def cfg(cluster: object = TWO, task: object = None, **extra: object) -> str:
    data: dict[str, object] = {"cluster": cluster, **extra}
    data["task"] = {"type": "worker", "index": 1} if task is None else task
    return json.dumps(data)


@pytest.mark.parametrize(("tf_config", "needle"), [
    ("{not json", "TF_CONFIG: not valid JSON"),
    (cfg(task={"type": "worker", "index": 5}), "task.index 5 is out of range"),
    (cfg({"worker": ["10.0.0.1:2222", "10.0.0.2:abc"]}), "the port 'abc' is not a number"),
    (cfg({"chief": [], "worker": ["10.0.0.1:2222", "10.0.0.2:2222"]}), "declared but empty"),
    (json.dumps({"cluster": TWO}), "has no \"task\""),
])
def test_gpudiag_worker_refuses_a_bad_tf_config_before_starting(logdir: Path, tf_config: str,
                                                               needle: str) -> None:
    proc = gpudiag("worker", "--logdir", str(logdir), env={"TF_CONFIG": tf_config}, timeout=60)
    assert_usage_error(proc, needle, logdir)


def test_gpudiag_worker_without_tf_config_or_slurm(logdir: Path) -> None:
    proc = gpudiag("worker", "--logdir", str(logdir), env={"TF_CONFIG": ""}, timeout=60)
    assert_usage_error(proc, "TF_CONFIG is not set", logdir)
    proc = gpudiag("worker", "--slurm", "--logdir", str(logdir),
                   env={"SLURM_PROCID": "", "TF_CONFIG": ""}, timeout=60)
    assert proc.returncode == 2 and "--slurm: SLURM_" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("args", "needle"), [
    (["--mode", "ps"], "--mode needs --workers"),
    (["--workers", "2", "--mode", "async"], "--mode 'async' is not one of"),
    (["--workers", "2", "--fault", "kill:worker-1"], "kill needs the step"),
    (["--workers", "2", "--fault", "explode:worker-1@3"], "write kill:TASK@STEP"),
    (["--workers", "2", "--fault", "kill:worker-2@3"], "there is no worker-2"),
    (["--workers", "2", "--fault", "kill:worker-1@500", "--steps", "50"], "step 500 is not in"),
    (["--workers", "2", "--virtual-gpus", "2"], "--virtual-gpus does not apply to --workers"),
    (["--workers", "2", "--data", "x.npz"], "--data is not supported with --workers"),
])
def test_scaling_workers_refuses_bad_options(logdir: Path, args: list[str], needle: str) -> None:
    assert_usage_error(gpudiag("scaling", *args, "--logdir", str(logdir), timeout=60), needle,
                       logdir)


def test_cluster_parent_modules_import_no_tensorflow() -> None:
    modules = ("gpudiag.records.tfconfig", "gpudiag.cluster.messages", "gpudiag.records.cluster",
               "gpudiag.cluster.supervise", "gpudiag.cluster.clusterrun", "gpudiag.cluster.judge",
               "gpudiag.cluster.local",
               "gpudiag.cluster.worker_cmd", "gpudiag.cluster.options",
               "gpudiag.verdicts.cluster")
    code = (f"import importlib, sys\nfor m in {modules!r}:\n"
            "    importlib.import_module(m)\n"
            "    assert 'tensorflow' not in sys.modules, m\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
