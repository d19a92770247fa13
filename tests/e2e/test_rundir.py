"""gpudiag.rundir.load_run, the one reader of a run directory: every sample run, a fresh
real `gpudiag run` of a Keras fit, and paths that are not runs; Report/Finding round-trip."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from golden import GoldenRuns
from helpers import REPO, gpudiag, read_scalars, run_dirs

from gpudiag import layout
from gpudiag.report import Finding, Report, to_json_dict
from gpudiag.rundir import RunDirError, list_runs, load_run

SAMPLES = sorted(p.parent for p in (REPO / "sample_runs").glob("*/*/report.json"))


def test_finding_and_report_round_trip_exactly() -> None:
    f = Finding("run.bottleneck", "warn", "input-bound", {"step_s": 0.007, "parts_s": {
        "/device:CPU:0": {"period_s": 0.007, "input_s": 0.004}}, "causes": ["input-bound"]},
        advice="prefetch")
    assert Finding.from_dict(f.to_dict()) == f
    report = Report("run", "/x/run", argv=["gpudiag", "run"], started_at="2026-11-26T00:00:00",
                    finished_at="2026-11-26T00:01:00", partial=False,
                    environment={"python": "3.11"}, devices={"summary": "1 CPU"},
                    findings=[f, Finding("run.crash", "ok", "no crash")], data={"run": {"a": 1}})
    written = to_json_dict(report)
    assert Report.from_dict(written).to_dict() == written
    again = json.loads(json.dumps(written))
    assert Report.from_dict(again).to_dict() == again


@pytest.mark.parametrize("run_dir", SAMPLES, ids=lambda p: p.parent.name)
def test_every_sample_run_loads(run_dir: Path) -> None:
    run = load_run(run_dir)
    on_disk = json.loads((run_dir / layout.REPORT_JSON).read_text())
    assert run.report_json == on_disk
    typed = run.report.to_dict()
    if on_disk["schema_version"] == 1:  # written before findings had title, question, actions
        for f in typed["findings"]:
            assert f["question"], f["id"]  # from the registry
            del f["title"], f["question"], f["actions"]
    assert typed == {**on_disk, "schema_version": layout.SCHEMA_VERSION}  # exactly on disk
    assert run.command == on_disk["command"] == run_dir.parent.name
    assert run.status == "complete" and run.schema_version == on_disk["schema_version"]
    assert set(run.children) == {p.name for p in (run_dir / layout.CHILDREN_DIR).glob("*")}
    assert list(run.traces) == sorted(run_dir.rglob("*.xplane.pb"))
    assert run.live is None


def test_sample_scaling_and_run_have_their_step_series() -> None:
    (scaling,) = [load_run(p) for p in SAMPLES if p.parent.name == "scaling"]
    configs = scaling.report.data["scaling"]["configs"]
    assert set(scaling.loops) == set(configs)
    for name, loop in scaling.loops.items():
        steps = read_scalars(scaling.path / name)[layout.TAG_TRAIN_STEP_S]
        assert [p.step_s for p in loop.steps] == pytest.approx([e.value for e in steps])
        assert loop.batch_size == configs[name]["global_batch"]
    (run,) = [load_run(p) for p in SAMPLES if p.parent.name == "run"]
    (loop,) = run.loops.values()
    assert loop.name == "Model.fit" and len(loop.steps) > 100
    assert all(p.loss is not None for p in loop.steps)


def test_a_fresh_keras_fit_run_loads(fit_tiny: GoldenRuns) -> None:
    (run_dir,) = fit_tiny.run_dirs  # tests/golden.py
    run = load_run(run_dir)
    assert run.command == "run" and run.status == "complete"
    assert layout.RUN_CHILD_NAME in run.children
    program = run.children[layout.RUN_CHILD_NAME]
    assert program.stdout is not None and program.stdout.is_file() and program.events
    (loop,) = run.loops.values()
    scalars = read_scalars(run_dir / loop.tb_run)
    assert len(loop.step_times()) == len(scalars[layout.TAG_RUN_STEP_TIME])
    assert loop.losses() == pytest.approx(
        {e.step: e.value for e in scalars[layout.TAG_RUN_LOSS]})
    assert run.traces and all(t.is_relative_to(run_dir) for t in run.traces)
    (b,) = run.breakdown
    finding = run.finding("run.bottleneck")
    assert finding is not None and b.step_s == finding["evidence"]["step_s"]
    assert set(b.devices) == set(finding["evidence"]["parts_s"])
    assert [r.path for r in list_runs(fit_tiny.logdir)] == [run_dir]
    learning = run.finding("run.learning")  # a small healthy fit: it learns
    assert learning is not None and learning["status"] == "ok", learning


def test_a_program_that_fails_before_any_tensorflow_work_is_a_failed_run(
        tmp_path: Path) -> None:
    """A typo in the program's import (a missing script is refused before any run
    directory exists): it exits 1 before TensorFlow is imported."""
    logdir = tmp_path / "runs"
    script = tmp_path / "train.py"
    script.write_text("import tensorflw\n")
    proc = gpudiag("run", "--logdir", str(logdir), "--", sys.executable, str(script))
    assert proc.returncode == 1, proc.stderr[-1000:]
    (run_dir,) = run_dirs(logdir)
    run = load_run(run_dir)
    assert run.status == "failed" and run.loops == {}


def test_paths_that_are_not_runs(tmp_path: Path) -> None:
    with pytest.raises(RunDirError, match=r"^not a gpudiag run directory: .* \(no report"):
        load_run(tmp_path)
    with pytest.raises(RunDirError, match="does not exist"):
        load_run(tmp_path / "missing")
    (tmp_path / layout.REPORT_JSON).write_text("{not json")
    with pytest.raises(RunDirError, match="not readable JSON"):
        load_run(tmp_path)
    (tmp_path / layout.REPORT_JSON).write_text(json.dumps(
        {"schema_version": layout.SCHEMA_VERSION + 1, "command": "run", "findings": []}))
    with pytest.raises(RunDirError, match="schema_version"):
        load_run(tmp_path)
    assert RunDirError("x").exit_code == 2


def test_a_running_run_is_running_and_says_what_its_live_files_say(tmp_path: Path) -> None:
    src = SAMPLES[[p.parent.name for p in SAMPLES].index("run")]
    report = json.loads((src / layout.REPORT_JSON).read_text())
    report.update(partial=True, finished_at=None, interrupted=False)
    run_dir = tmp_path / src.name
    (run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME).mkdir(parents=True)
    (run_dir / layout.REPORT_JSON).write_text(json.dumps(report))
    (run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME / layout.run_events_name(7)
     ).write_text("")
    run = load_run(run_dir)
    assert run.status == "running" and run.live is not None
    assert [p.name for p in run.live.event_files] == [layout.run_events_name(7)]
    report["interrupted"] = True
    (run_dir / layout.REPORT_JSON).write_text(json.dumps(report))
    assert load_run(run_dir).status == "interrupted"


def test_reading_a_run_imports_no_tensorflow() -> None:
    code = ("import sys\nfrom gpudiag.rundir import list_runs\n"
            f"runs = list_runs(__import__('pathlib').Path({str(REPO / 'sample_runs')!r}))\n"
            "assert sum(len(r.loops) for r in runs) >= 7\n"
            "assert 'tensorflow' not in sys.modules\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=REPO, timeout=120)
    assert proc.returncode == 0, proc.stderr
