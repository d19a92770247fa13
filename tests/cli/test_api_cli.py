"""gpudiag's public Python API (gpudiag/api, docs/api.md): ``gpudiag.load_run``,
``list_runs``, ``explain``, ``diff`` on the sample runs and the golden GPU traces: typed
records, the same findings the CLI writes, nothing written without a logdir, gpudiag's own
one-line errors, and no command-line module (Typer, rich, click, gpudiag.cli) imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TESTS_DIR, gpudiag, run_dirs

import gpudiag as api
from gpudiag.report import Finding

SAMPLES = REPO / "sample_runs"
SAMPLE_RUNS = sorted(p.parent for p in SAMPLES.glob("*/*/report.json"))
(SAMPLE_RUN,) = [p for p in SAMPLE_RUNS if p.name.endswith("-run")]
TRACES = TESTS_DIR / "data" / "gpu_traces"
LAUNCH_BOUND = TRACES / "rtx5000_launch_bound"
GPU_BOUND = TRACES / "v100_gpu_bound"
BALANCED = TESTS_DIR / "data" / "cpu_traces" / "balanced_fit"

CLI_MODULES = ("typer", "rich", "click", "gpudiag.cli", "gpudiag.cliopts", "gpudiag.execute",
               "gpudiag.mcp", "mcp", "tensorflow")


def _fresh(code: str) -> Any:
    """Run ``code`` in a fresh interpreter (gpudiag on its path); its last stdout line is
    JSON."""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


_LOADED = """
import json, sys
cli = {cli!r}
"""


def test_import_gpudiag_imports_nothing_else() -> None:
    """Not even typing: the package root is also loaded into the user's program."""
    out = _fresh("import sys\nbefore = set(sys.modules)\nimport gpudiag\n"
                 "added = sorted(set(sys.modules) - before)\n"
                 "import json\nprint(json.dumps(added))")
    assert set(out) <= {"gpudiag", "__future__"} and "gpudiag" in out


def test_every_call_runs_without_a_command_line_module() -> None:
    """load_run, list_runs, explain and diff, each used for real in one fresh process:
    typed results, and none of Typer, rich, click, gpudiag's CLI or TensorFlow imported."""
    code = _LOADED.format(cli=CLI_MODULES) + f"""
import gpudiag
runs = gpudiag.list_runs({str(SAMPLES)!r})
one = gpudiag.load_run({str(SAMPLE_RUN)!r})
explained = gpudiag.explain({str(LAUNCH_BOUND)!r})
diffed = gpudiag.diff({str(LAUNCH_BOUND)!r}, {str(GPU_BOUND)!r})
typed = all(isinstance(f, gpudiag.Finding) for r in (one, explained, diffed)
            for f in r.report.findings)
loaded = sorted(m for m in sys.modules if m in cli or m.split('.')[0] in cli)
print(json.dumps({{"runs": len(runs), "typed": typed, "loaded": loaded,
                  "types": [type(r).__name__ for r in (one, explained, diffed)]}}))
"""
    out = _fresh(code)
    assert out == {"runs": len(SAMPLE_RUNS), "typed": True, "loaded": [],
                   "types": ["Run", "Run", "Run"]}


def test_explain_names_the_launch_bound_trace_and_writes_nothing(tmp_path: Path,
                                                                 monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    before = sorted(LAUNCH_BOUND.rglob("*"))
    run = api.explain(LAUNCH_BOUND)
    assert sorted(LAUNCH_BOUND.rglob("*")) == before and list(tmp_path.iterdir()) == []
    assert run.command == "explain" and run.status == "complete"
    assert run.path == LAUNCH_BOUND and run.report.run_dir == ""
    assert run.report.argv == [f"gpudiag.explain({str(LAUNCH_BOUND)!r})"]  # not pytest's
    (f,) = run.report.findings
    assert isinstance(f, Finding) and f.id == "explain.bottleneck" and f.status == "warn"
    assert f.evidence["causes"] == ["launch-bound"]  # truth: tests/data/gpu_traces' README
    assert f.evidence["kernels"]["/device:GPU:0"]["per_step"] == pytest.approx(100)
    (b,) = run.breakdown
    assert b.bottleneck == "launch-bound" and list(b.devices) == ["/device:GPU:0"]
    assert len(run.loops["profiled steps"].steps) == f.evidence["steps"] == 18


def test_a_balanced_keras_fit_s_recorded_steps_have_no_bottleneck() -> None:
    """tests/programs/balanced_fit.py's four profiled steps, recorded on a quiet machine
    (tests/data/cpu_traces/balanced_fit/README.md): compute 70 %, host 29 % against the
    50 % threshold. Whether a live run is judged so depends on the machine's load; on
    these steps the verdict is fixed: no bottleneck, compute named the largest part."""
    run = api.explain(BALANCED)
    (f,) = run.report.findings
    assert f.id == "explain.bottleneck" and f.status == "ok", f.message
    assert f.evidence["causes"] == [] and f.evidence["steps"] == 4
    shares = f.evidence["shares"]
    assert shares["compute"] == pytest.approx(0.70, abs=0.01)
    assert shares["host"] == pytest.approx(0.29, abs=0.01) and shares["input"] < 0.02
    assert f.evidence["step_s"] == pytest.approx(0.00532, rel=0.01)
    assert "no bottleneck" in f.message and "compute 70 %" in f.message


def test_explain_of_a_run_directory_reads_its_trace_with_what_the_run_recorded() -> None:
    """The sample `gpudiag run`'s trace, explained again: read with the placement and the
    loop its run recorded (gpudiag.run.windowfacts), so it gives the run's own breakdown:
    ``/device:CPU:0`` stays itself (not one ``/host:CPU`` row), the loop is named."""
    ran = api.load_run(SAMPLE_RUN).finding("run.bottleneck")
    assert ran is not None
    (f,) = api.explain(SAMPLE_RUN).report.findings
    assert list(f.evidence["devices"]) == list(ran["evidence"]["devices"]) == ["/device:CPU:0"]
    assert f.message.startswith("Model.fit: ") and ran["message"].startswith("Model.fit: ")
    assert "/host:CPU" not in f.message and "not recorded" not in f.message, f.message
    assert f.evidence["causes"] == ran["evidence"]["causes"]
    assert f.evidence["step_s"] == pytest.approx(ran["evidence"]["step_s"])


def test_explain_into_a_logdir_is_the_cli_s_run(tmp_path: Path) -> None:
    """With a logdir, one explain run directory, read back; its findings are those of the
    run kept in memory and of `gpudiag explain` on the same trace."""
    run = api.explain(str(LAUNCH_BOUND), logdir=tmp_path / "api")
    (run_dir,) = run_dirs(tmp_path / "api")
    assert run.path == run_dir and run.report.run_dir == str(run_dir)
    on_disk = json.loads((run_dir / "report.json").read_text())
    assert on_disk["argv"] == [
        f"gpudiag.explain({str(LAUNCH_BOUND)!r}, logdir={str(tmp_path / 'api')!r})"]
    memory = api.explain(LAUNCH_BOUND)
    proc = gpudiag("explain", "--logdir", str(tmp_path / "cli"), str(LAUNCH_BOUND))
    assert proc.returncode == 0, proc.stderr
    (cli_dir,) = run_dirs(tmp_path / "cli")
    cli = api.load_run(cli_dir)
    assert ([f.to_dict() for f in run.report.findings] == [
        f.to_dict() for f in memory.report.findings] == [f.to_dict() for f in cli.report.findings])
    assert run.loops == memory.loops == cli.loops


def test_diff_of_two_traces_says_the_bottleneck_moved_and_writes_nothing(
        tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    run = api.diff(LAUNCH_BOUND, GPU_BOUND)
    assert list(tmp_path.iterdir()) == []
    assert run.command == "diff" and run.path == GPU_BOUND and run.report.run_dir == ""
    assert run.report.argv == [f"gpudiag.diff({str(LAUNCH_BOUND)!r}, {str(GPU_BOUND)!r})"]
    found = {f.id: f for f in run.report.findings}
    assert all(isinstance(f, Finding) for f in found.values())
    moved = found["diff.bottleneck.explain.bottleneck"]
    assert "the bottleneck moved: launch-bound -> gpu-bound" in moved.message
    record = run.report.data["diff"]
    assert (record["a"], record["b"]) == (str(LAUNCH_BOUND), str(GPU_BOUND))
    assert record["command_a"] == record["command_b"] == "explain"
