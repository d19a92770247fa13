"""`gpudiag memory` for real: TensorFlow in child processes, report and TensorBoard files.

No GPU here: the GPU modes must be skip findings with the reason, the CPU's memory info
must be reported, and the "modify after initialise" error must come from TensorFlow itself.
The --fraction helpers (limit from a fraction of GPU:0's memory) run on the fake NVML backend.
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers import (
    REPO,
    assert_usage_error,
    findings_by_id,
    gpudiag,
    load_report,
    read_scalars,
    run_dirs,
)

SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())
MIB, GIB = 2**20, 2**30


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--fraction", "0"], "--fraction"),
        (["--fraction", "1.5"], "--fraction"),
        (["--fraction", "abc"], "--fraction"),
        (["--fraction", "-0.2"], "--fraction"),
        (["--fraction", "0.5", "--memory-limit-mb", "512"], "not both"),
        (["--steps", "0"], "--steps"),
        (["--step-mb", "0"], "--step-mb"),
        (["--memory-limit-mb", "0"], "--memory-limit-mb"),
    ],
)
def test_bad_input_one_line_exit_2_nothing_written(
    args: list[str], needle: str, logdir: Path
) -> None:
    proc = gpudiag("memory", "--logdir", str(logdir), *args, timeout=60)
    assert_usage_error(proc, needle, logdir)


@pytest.mark.slow
def test_memory_without_gpu(logdir: Path) -> None:
    # An inherited TF_FORCE_GPU_ALLOW_GROWTH must not leak into the non-env modes.
    proc = gpudiag(
        "memory",
        "--logdir",
        str(logdir),
        "--steps",
        "3",
        "--step-mb",
        "8",
        "--json",
        env={"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    (run_dir,) = run_dirs(logdir)
    assert report == load_report(run_dir)
    jsonschema.validate(report, SCHEMA)
    found = findings_by_id(report)
    default = report["data"]["memory"]["default"]
    if default["gpu_available"]:
        pytest.skip("a GPU is visible: the no-GPU path is not exercised here")

    # GPU modes: skips with the reason, never passes
    for check in ("memory.default", "memory.growth", "memory.growth-env", "memory.limit"):
        assert found[check]["status"] == "skip", found[check]
        assert "TensorFlow sees no GPU" in found[check]["message"]
    # the CPU's memory info, where TensorFlow gives it: the pattern's 3 x 8 MiB
    cpu = found["memory.cpu"]
    assert cpu["status"] == "ok"
    assert cpu["evidence"]["tf_peak_bytes"] == 24 * MIB
    assert cpu["evidence"]["tf_peak_by_step"] == [0, 8 * MIB, 16 * MIB, 24 * MIB]
    assert cpu["evidence"]["released_current_bytes"] == 0
    assert default["env"]["inherited_TF_FORCE_GPU_ALLOW_GROWTH"] == "true"
    assert default["env"]["TF_FORCE_GPU_ALLOW_GROWTH"] is None

    # the classic mistake, observed from TensorFlow in a child process
    modify = found["memory.modify-after-init"]
    assert modify["status"] == "ok"
    (attempt,) = modify["evidence"]["attempts"]
    assert attempt["raised"] and attempt["error_type"] == "RuntimeError"
    assert attempt["error"] == "Virtual devices cannot be modified after being initialized"
    assert attempt["error"] in modify["message"] and "To fix:" in modify["message"]
    stderr = (run_dir / "children" / "memory-modify_after_init" / "stderr.txt").read_text()
    assert "Traceback" not in stderr  # caught inside the child, which exited cleanly

    # TensorBoard: the CPU pattern as scalars, read back
    scalars = read_scalars(run_dir / "memory-cpu")
    assert [e.value for e in scalars["memory/tf_current_mib"]] == [0, 8, 16, 24, 0]
    assert [e.value for e in scalars["memory/tf_peak_mib"]][-1] == 24
    assert "memory/nvml_process_mib" not in scalars
    assert "TensorFlow sees no GPU" in (run_dir / "report.md").read_text()

