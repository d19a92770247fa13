"""The typed evidence (gpudiag.layout.evidence) decoded by load_run: every family that declares an
evidence type round-trips report.json -> load_run with its record, over the sample runs
and the golden GPU traces' explain runs; a field of the wrong kind is named; the step's
parts (STEP_PARTS, copy among them) add up to the step through load_run and in diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO, TESTS_DIR, gpudiag, run_dirs

from gpudiag import layout
from gpudiag.layout.evidence import STEP_PARTS, TYPES, Bottleneck, decode
from gpudiag.layout.families import family_of
from gpudiag.rundir import Run, load_run

SAMPLES = sorted(p.parent for p in (REPO / "sample_runs").rglob(layout.REPORT_JSON))
TRACES = TESTS_DIR / "data" / "gpu_traces"


def typed(run: Run) -> list[tuple[str, object]]:
    """Each finding of a family with an evidence type, with what load_run decoded."""
    out = []
    for f in run.report.findings:
        family = family_of(f.id)
        if family is not None and family.evidence:
            record = run.evidence(f)
            assert isinstance(record, TYPES[family.evidence]), f.id
            assert run.evidence(f.id) == record
            assert decode(f.id, json.loads(json.dumps(f.evidence))) == record  # from the file
            out.append((f.id, record))
    return out


def test_a_report_whose_evidence_does_not_fit_is_one_line_exit_2(tmp_path: Path) -> None:
    run_dir = tmp_path / "r"
    run_dir.mkdir()
    report = json.loads((SAMPLES[0] / layout.REPORT_JSON).read_text())
    report["findings"] = [{"id": "run.bottleneck", "status": "warn", "message": "m",
                           "evidence": {"step_s": "slow"}, "advice": ""}]
    (run_dir / layout.REPORT_JSON).write_text(json.dumps(report))
    proc = gpudiag("diff", str(run_dir), str(run_dir), "--logdir", str(tmp_path / "runs"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "step_s is not a number" in proc.stderr  # the field named, in one line


@pytest.fixture(scope="module")
def explained(tmp_path_factory: pytest.TempPathFactory) -> Run:
    """`gpudiag explain` over every golden GPU trace, as a user runs it."""
    logdir = tmp_path_factory.mktemp("explain") / "runs"
    proc = gpudiag("explain", "--logdir", str(logdir), str(TRACES), timeout=600)
    assert proc.returncode in (0, 1), proc.stderr
    (run_dir,) = run_dirs(logdir)
    return load_run(run_dir)


@pytest.mark.slow
def test_the_copy_heavy_steps_parts_add_up_to_its_step_in_load_run_and_diff(
        explained: Run, tmp_path: Path) -> None:
    (copy,) = [b for b in explained.breakdown if "rtx5000_copy_heavy" in (b.trace or "")]
    (gpu,) = [p for d, p in copy.devices.items() if "GPU" in d]
    assert gpu.copy_s > 0.2 * gpu.period_s  # truth: H2D 21.7 % of the step
    assert sum(gpu.parts().values()) == pytest.approx(gpu.period_s, rel=1e-6)
    proc = gpudiag("diff", str(explained.path), str(explained.path), "--logdir",
                   str(tmp_path / "runs"))
    assert proc.returncode in (0, 1), proc.stderr
    (run_dir,) = run_dirs(tmp_path / "runs")
    record = load_run(run_dir).report.data[layout.DIFF_DATA_KEY]
    (neck,) = [n for n in record["bottlenecks"] if n["finding_a"] == copy.finding_id]
    mine = [p for p in neck["parts"] if "GPU" in p["device"]]
    assert {p["part"] for p in mine} == set(STEP_PARTS)
    assert sum(p["a_s"] for p in mine) == pytest.approx(neck["step_a_s"], rel=1e-6)


@pytest.mark.slow
def test_the_gpu_traces_explain_run_loads_with_typed_evidence(explained: Run) -> None:
    found = typed(explained)
    assert len([r for _, r in found if isinstance(r, Bottleneck)]) >= 5
