"""The checked-in `gpudiag monitor` sample run (sample_runs/): a TensorFlow
workload watched without NVML, so every GPU check is a skip with the reason."""

from __future__ import annotations

import json

from helpers import REPO, findings_by_id, load_report

(RUN,) = [p.parent for p in sorted((REPO / "sample_runs").glob("*/*/report.json"))
          if json.loads(p.read_text())["command"] == "monitor"]


def test_monitor_sample_skips_gpu_checks_with_the_reason() -> None:
    report = load_report(RUN)
    found = findings_by_id(report)
    reason = report["environment"]["nvml_unavailable_reason"]
    assert reason and "libnvidia-ml.so.1" in reason
    assert found["monitor.command"]["status"] == "ok"
    assert found["monitor.command"]["evidence"]["returncode"] == 0
    for check in ("monitor.nvml", "monitor.every-gpu-used"):
        assert found[check]["status"] == "skip" and reason in found[check]["message"]
    assert report["data"]["monitor"]["sampling"] is None
    assert not (RUN / "nvml").exists()  # no samples, no NVML scalars
