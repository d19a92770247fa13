"""The env, placement and memory probes' typed results: JSON round trips, and the
checked-in sample runs' findings re-derived from the children's own result.json and stderr."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

from conftest import REPO

from gpudiag import catalogue
from gpudiag.readers.placementlog import parse, split_sections
from gpudiag.records.results import (
    AllocationError,
    AllocationPattern,
    EnvResult,
    InvalidPinResult,
    MemoryNvml,
    MemoryReading,
    MemoryResult,
    MultitowerResult,
    NoKernelPin,
    PastLimit,
    Pin,
    PinnedResult,
    PlacementResult,
    SoftPinResult,
    Workload,
)
from gpudiag.report import Finding
from gpudiag.verdicts import env as env_verdicts
from gpudiag.verdicts import placement as placement_verdicts

SAMPLES = REPO / "sample_runs"


def sample(command: str) -> tuple[dict[str, Any], Path]:
    (path,) = [p for p in sorted(SAMPLES.glob("*/*/report.json"))
               if json.loads(p.read_text())["command"] == command]
    return json.loads(path.read_text()), path.parent / "children"


def child_result(child_dir: Path) -> dict[str, Any]:
    payload = json.loads((child_dir / "result.json").read_text())
    assert payload["ok"] is True
    return payload["result"]


def as_json(findings: list[Finding]) -> list[dict[str, Any]]:
    return json.loads(json.dumps([asdict(f) for f in findings]))


def test_placement_result_survives_json() -> None:
    cpu0, cpu1, gpu0 = "/device:CPU:0", "/device:CPU:1", "/device:GPU:0"
    result = PlacementResult(
        setup={"kind": "gpu", "host_device": cpu0}, tf_version="2.21.0",
        workload=Workload(gpu0, gpu0),
        pinned=PinnedResult([cpu0, gpu0], [Pin(cpu0, cpu0), Pin(gpu0, gpu0)],
                            {"pinned_0": cpu0, "pinned_1": gpu0}),
        invalid_soft_off=InvalidPinResult("/device:GPU:1", raised=False, actual=cpu1),
        soft_on=SoftPinResult("/device:GPU:1", gpu0, True),
        no_gpu_kernel=NoKernelPin("AsString", gpu0, cpu0),
        multitower=MultitowerResult([gpu0], cpu0, 1e-7, True),
    )
    assert PlacementResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_env_sample_findings_rederive_from_the_child() -> None:
    report, children = sample("env")
    child = children / "env"
    tf_info = EnvResult.from_dict(child_result(child))
    assert EnvResult.from_dict(json.loads(json.dumps(tf_info.to_dict()))) == tf_info
    env = report["environment"]
    gpu_log = catalogue.gpu_log_lines((child / "stderr.txt").read_text())
    findings = env_verdicts.env_findings(tf_info, env["nvml"], env["nvml_unavailable_reason"],
                                         gpu_log)
    assert as_json(findings) == report["findings"]


def test_placement_sample_findings_rederive_from_the_child() -> None:
    report, children = sample("placement")
    child = children / "placement"
    result = PlacementResult.from_dict(child_result(child))
    sections = {n: parse(t) for n, t in split_sections((child / "stderr.txt").read_text()).items()}
    rows = [r for rs in sections.values() for r in rs]
    kind, host = result.setup["kind"], result.setup["host_device"]
    findings = [
        placement_verdicts.placement_log(rows, kind),
        placement_verdicts.default_device(sections["workload"], kind, host),
        placement_verdicts.pinned(result.pinned, sections["pinned"]),
        placement_verdicts.invalid_device(result.invalid_soft_off),
        placement_verdicts.soft_fallback(result.soft_on),
        placement_verdicts.no_gpu_kernel(result.no_gpu_kernel),
        placement_verdicts.multitower(result.multitower, sections["multitower"]),
    ]
    stored = {f["id"]: f for f in report["findings"]}
    for f in as_json(findings):
        assert (f["status"], f["message"]) == (stored[f["id"]]["status"],
                                               stored[f["id"]]["message"]), f["id"]
        # typed records spell out every field: old evidence is a subset of the new
        assert stored[f["id"]]["evidence"].items() <= f["evidence"].items(), f["id"]
    assert len(findings) == len(stored)


def test_memory_result_survives_json_and_keeps_nvml_fields_only_where_read() -> None:
    mib = 2**20
    readings = [MemoryReading(0, "initialised", 0, 0.0, 0, 0, 300 * mib, None),
                MemoryReading(1, "grow", 64, 0.1, 64 * mib, 64 * mib, 800 * mib, 500 * mib)]
    result = MemoryResult(
        "limit", True, ["/physical_device:GPU:0"], {"TF_FORCE_GPU_ALLOW_GROWTH": None},
        MemoryNvml(True, index=0, total_bytes=40 * 2**30, baseline_device_used_bytes=300 * mib),
        pattern=AllocationPattern("/GPU:0", 2, 64, readings,
                                  AllocationError(2, "ResourceExhaustedError", "OOM")),
        memory_growth=False, memory_limit_mb=128,
        past_limit=PastLimit(192, True, "ResourceExhaustedError", "OOM when allocating"),
        alive_after=True, after_past_limit=MemoryReading(-1, "after_past_limit", 0, 0.2, 0, 0),
    )
    d = json.loads(json.dumps(result.to_dict()))
    assert MemoryResult.from_dict(d) == result
    assert d["pattern"]["readings"][0]["nvml_device_used_bytes"] == 300 * mib
    assert "nvml_process_used_bytes" not in d["pattern"]["readings"][0]
    assert "nvml_device_used_bytes" not in d["after_past_limit"]


def test_memory_sample_results_read_back() -> None:
    _, children = sample("memory")
    for mode in ("default", "modify_after_init"):
        raw = child_result(children / f"memory-{mode}")
        result = MemoryResult.from_dict(raw)
        assert result.mode == mode and result.nvml.available is False
        assert MemoryResult.from_dict(json.loads(json.dumps(result.to_dict()))) == result


def test_child_configs_round_trip_and_define_the_defaults_once() -> None:
    from gpudiag.cli import app
    from gpudiag.records.results import MemoryConfig, PlacementConfig

    placement = PlacementConfig(virtual_gpus=3, memory_limit_mb=512)
    assert PlacementConfig.from_dict(placement.to_dict()) == placement
    memory = MemoryConfig(mode="limit", memory_limit_mb=256)
    assert MemoryConfig.from_dict(memory.to_dict()) == memory
    import typer

    command = typer.main.get_command(app)
    assert isinstance(command, typer.core.TyperGroup)
    options = {p.name: p.default for p in command.commands["memory"].params}
    assert options["steps"] == MemoryConfig.steps and options["step_mb"] == MemoryConfig.step_mb
