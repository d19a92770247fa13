"""gpudiag's public Python API (gpudiag/api, docs/api.md): ``gpudiag.load_run``,
``list_runs``, ``explain``, ``diff`` on the sample runs and the golden GPU traces: typed
records, the same findings the CLI writes, nothing written without a logdir, gpudiag's own
one-line errors, and no command-line module (Typer, rich, click, gpudiag.cli) imported."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO, run_dirs

import gpudiag as api
from gpudiag.report import Finding, Report
from gpudiag.rundir import Run

SAMPLES = REPO / "sample_runs"
SAMPLE_RUNS = sorted(p.parent for p in SAMPLES.glob("*/*/report.json"))
(SAMPLE_RUN,) = [p for p in SAMPLE_RUNS if p.name.endswith("-run")]


def test_the_public_names_are_all_there_and_nothing_else() -> None:
    assert sorted(api.__all__) == ["Finding", "GpudiagError", "Report", "Run", "RunDirError",
                                   "TryResult", "UsageError", "diff", "explain", "list_runs",
                                   "load_ipython_extension", "load_run", "try_fixes", "watch"]
    for name in api.__all__:
        assert getattr(api, name) is not None
        assert name in dir(api)
    assert api.Run is Run and api.Finding is Finding and api.Report is Report
    with pytest.raises(AttributeError, match="no attribute 'watchh'"):
        api.watchh  # noqa: B018
    for fn in (api.load_run, api.list_runs, api.explain, api.diff):
        assert fn.__doc__ and fn.__annotations__["return"] in ("Run", "list[Run]")


@pytest.mark.parametrize("run_dir", SAMPLE_RUNS, ids=lambda p: p.parent.name)
def test_load_run_gives_each_sample_run_typed(run_dir: Path) -> None:
    run = api.load_run(str(run_dir))  # a str is a path too
    on_disk = json.loads((run_dir / "report.json").read_text())
    assert isinstance(run, Run) and run.status == "complete"
    assert run.command == on_disk["command"] == run_dir.parent.name
    assert run.report.findings and all(isinstance(f, Finding) for f in run.report.findings)
    assert [f.id for f in run.report.findings] == [f["id"] for f in on_disk["findings"]]
    for typed, raw in zip(run.report.findings, on_disk["findings"], strict=True):
        assert typed.question  # its family's, declared in gpudiag.layout.families
        assert {k: v for k, v in typed.to_dict().items() if k in raw} == raw


def test_list_runs_gives_every_sample_run_newest_first() -> None:
    runs = api.list_runs(SAMPLES)
    assert sorted(r.path for r in runs) == SAMPLE_RUNS
    assert [r.started_at for r in runs] == sorted((r.started_at for r in runs), reverse=True)


def test_a_bad_path_is_gpudiag_s_one_line_error_and_writes_nothing(tmp_path: Path) -> None:
    logdir = tmp_path / "runs"
    with pytest.raises(api.UsageError, match=r"nowhere does not exist$"):
        api.explain(tmp_path / "nowhere", logdir=logdir)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(api.UsageError, match="no profiler trace"):
        api.explain(empty, logdir=logdir)
    with pytest.raises(api.RunDirError, match=r"no report\.json"):
        api.load_run(empty)
    with pytest.raises(api.RunDirError, match="without a step series"):
        api.diff(next(p for p in SAMPLE_RUNS if p.name.endswith("-env")), SAMPLE_RUN,
                 logdir=logdir)
    with pytest.raises(api.UsageError, match="must be a path"):
        api.load_run(42)  # type: ignore[arg-type]
    assert not logdir.exists()
    assert issubclass(api.RunDirError, api.GpudiagError)


def test_diff_of_a_sample_run_against_itself_is_no_change_and_written_with_a_logdir(
        tmp_path: Path) -> None:
    run = api.diff(SAMPLE_RUN, SAMPLE_RUN, logdir=tmp_path)
    (run_dir,) = run_dirs(tmp_path)  # run directories are read, never explained again
    assert run.path == run_dir and api.load_run(run_dir).report == run.report
    found = {f.id: f.status for f in run.report.findings}
    assert found["diff.step-time.model.fit"] == "ok" and "fail" not in found.values()
