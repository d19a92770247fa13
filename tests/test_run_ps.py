"""`gpudiag run` on parameter-server programs as people write them.

TF2: tests/programs/ps_tutorial_inprocess.py, the official parameter-server tutorial's
in-process cluster (3 workers and 2 parameter servers as tf.distribute.Server in the
program's own process, no TF_CONFIG) with its ClusterCoordinator custom loop. Real
TensorFlow, loopback only, no GPU.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from conftest import REPO, TESTS_DIR, findings_by_id, gpudiag, run_dirs

from gpudiag import layout

PY = sys.executable
PROGRAMS = TESTS_DIR / "programs"
SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())


def _report(run_dir: Path) -> dict[str, Any]:
    report: dict[str, Any] = json.loads((run_dir / layout.REPORT_JSON).read_text())
    jsonschema.validate(report, SCHEMA)
    return report


@pytest.mark.slow
def test_the_tutorial_s_in_process_cluster_is_no_false_alarm_and_work_counted_per_task(
        tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--", PY,
                   str(PROGRAMS / "ps_tutorial_inprocess.py"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Final loss is" in proc.stdout
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(_report(run_dir))

    # the coordinator (chief-0) TensorFlow added itself is part of the cluster, not a
    # task outside the spec; every task was seen: no TF_CONFIG, no other gpudiag run
    cluster = found["run.cluster"]
    assert cluster["status"] == "ok", cluster["message"]
    ev = cluster["evidence"]
    assert sorted(ev["expected"]) == ["chief-0", "ps-0", "ps-1", "worker-0", "worker-1", "worker-2"]
    assert ev["coordinator_added_by_tensorflow"] == ["chief-0"]
    assert ev["missing"] == [] and ev["unknown"] == []
    assert len({t["pid"] for t in ev["tasks"]}) == 1 and ev["in_process_pids"]
    assert "asynchronous" in cluster["message"]
    assert "in-process" in cluster["message"]

    # the work is counted where TensorFlow placed it: on every worker and both ps
    for name in ("worker-0", "worker-1", "worker-2", "ps-0", "ps-1"):
        assert sum(ev["ops_by_task"][name].values()) > 0, (name, ev["ops_by_task"])
    # the variables live on the parameter servers, round-robin
    assert ev["variables_by_task"]["ps-0"] > 0 and ev["variables_by_task"]["ps-1"] > 0

    dist = found["run.distribution"]
    assert dist["status"] == "ok", dist["message"]
    assert "asynchronous" in dist["message"] and "3 worker(s), 2 parameter server(s)" in \
        dist["message"]
    assert "steps ran on worker-0" in dist["message"] and "worker-2" in dist["message"]
    used = found["run.every-device-used"]
    assert used["status"] != "fail", used["message"]
    assert "every worker and parameter server did work" in used["message"]
    assert used["evidence"]["idle_tasks"] == []
    assert "ps-1" in used["message"]
