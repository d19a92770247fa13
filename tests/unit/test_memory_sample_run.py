"""The checked-in `gpudiag memory` sample run (sample_runs/): its findings
re-derive from the children's own results."""

from __future__ import annotations

import json
from dataclasses import asdict

from helpers import REPO, findings_by_id, load_report

from gpudiag.records.results import MemoryResult
from gpudiag.verdicts import memory as memory_verdicts

(RUN,) = [p.parent for p in sorted((REPO / "sample_runs").glob("*/*/report.json"))
          if json.loads(p.read_text())["command"] == "memory"]


def child_result(mode: str) -> MemoryResult:
    payload = json.loads((RUN / "children" / f"memory-{mode}" / "result.json").read_text())
    assert payload["ok"] is True
    return MemoryResult.from_dict(payload["result"])


def test_memory_sample_findings_rederive_from_the_children() -> None:
    report = load_report(RUN)
    found = findings_by_id(report)
    default, modify = child_result("default"), child_result("modify_after_init")
    assert default.gpu_available is False  # the CPU-only machine
    cpu = json.loads(json.dumps(asdict(memory_verdicts.memory_cpu(default))))
    # the sample was written by report schema 1 (no title, question or actions): every
    # field it holds re-derives exactly; those added since have nothing on disk to compare
    assert {k: cpu[k] for k in found["memory.cpu"]} == found["memory.cpu"]
    assert (found["memory.modify-after-init"]["message"]
            == memory_verdicts.memory_modify_after_init(modify).message)
    # the default pattern: 8 steps of 64 MiB on the CPU, all given back
    assert default.pattern is not None
    readings = default.pattern.readings
    assert [r.tf_current_bytes for r in readings] == [k * 64 * 2**20 for k in range(9)] + [0]
    for check in ("memory.default", "memory.growth", "memory.growth-env", "memory.limit"):
        assert found[check]["status"] == "skip"
