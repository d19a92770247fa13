"""Run directories, reports and the TensorBoard text summary, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers import load_report

import gpudiag
from gpudiag import layout
from gpudiag.report import Finding
from gpudiag.session import RunSession

SCHEMA = json.loads((Path(gpudiag.__file__).parent / "report.schema.json").read_text())


def test_interrupted_session_leaves_a_readable_partial_report(tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RunSession("scaling", tmp_path) as s:
        s.add(Finding("scaling.devices", "ok", "one device done", title="one device done"))
        raise KeyboardInterrupt
    report = load_report(s.run_dir)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is True and report["interrupted"] is True
    assert [f["id"] for f in report["findings"]] == ["scaling.devices"]
    assert "interrupted, partial" in (s.run_dir / "report.md").read_text()


def test_findings_added_in_a_batch_are_written_once_when_it_ends(tmp_path: Path) -> None:
    """A run's end adds its findings at once: report.json is rewritten when the batch ends,
    not at each; the version on disk meanwhile is the whole one from before (kill -9)."""
    s = RunSession("run", tmp_path)
    s.add(Finding("run.command", "ok", "ran", title="ran"))
    with s.batch():
        s.add(Finding("run.devices", "ok", "one device", title="one device"))
        s.set("processes", {"n": 1})
        on_disk = load_report(s.run_dir)
        assert [f["id"] for f in on_disk["findings"]] == ["run.command"]
        assert "processes" not in on_disk["data"]
    on_disk = load_report(s.run_dir)
    assert [f["id"] for f in on_disk["findings"]] == ["run.command", "run.devices"]
    assert on_disk["data"]["processes"] == {"n": 1}


def test_a_batch_stopped_by_ctrl_c_still_leaves_its_findings_in_the_report(
        tmp_path: Path) -> None:
    with pytest.raises(KeyboardInterrupt), RunSession("run", tmp_path) as s, s.batch():
        s.add(Finding("run.devices", "ok", "one device", title="one device"))
        raise KeyboardInterrupt
    report = load_report(s.run_dir)
    assert report["interrupted"] is True
    assert [f["id"] for f in report["findings"]] == ["run.devices"]


def test_run_dirs_are_never_reused(tmp_path: Path) -> None:
    first = layout.new_run_dir(tmp_path, "env")
    (first / "mine.txt").write_text("keep")
    second = layout.new_run_dir(tmp_path, "env")
    third = layout.new_run_dir(tmp_path, "env")
    assert len({first, second, third}) == 3
    assert (first / "mine.txt").read_text() == "keep"


def test_report_json_is_always_valid_mid_run(tmp_path: Path) -> None:
    s = RunSession("env", tmp_path)
    report = load_report(s.run_dir)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is True and report["findings"] == []


def test_finding_rejects_unknown_status() -> None:
    with pytest.raises(ValueError, match="unknown status"):
        Finding("x", "great", "nope")  # type: ignore[arg-type]


def test_bad_input_found_mid_run_is_named_in_the_report(tmp_path: Path) -> None:
    from gpudiag.errors import UsageError

    with pytest.raises(UsageError), RunSession("scaling", tmp_path) as s:
        raise UsageError("--data x.tfrecord: record 17 is corrupt")
    report = load_report(s.run_dir)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is True and report["interrupted"] is False
    (finding,) = report["findings"]
    assert finding["id"] == "scaling.error" and finding["status"] == "fail"
    assert finding["message"] == "--data x.tfrecord: record 17 is corrupt"


def test_non_finite_numbers_are_null_in_strict_json_with_a_note(tmp_path: Path) -> None:
    with RunSession("monitor", tmp_path) as s:
        s.add(Finding("monitor.x", "ok", "numbers", {"rate": float("inf"), "ok": 1.5,
                                                      "series": [1.0, float("nan")]}))

    def reject(constant: str) -> None:
        raise ValueError(constant)

    report = json.loads((s.run_dir / "report.json").read_text(), parse_constant=reject)
    jsonschema.validate(report, SCHEMA)
    evidence = report["findings"][0]["evidence"]
    assert evidence == {"rate": None, "ok": 1.5, "series": [1.0, None]}
    assert report["data"]["non_finite"]["values"] == [
        "findings[0].evidence.rate (inf)", "findings[0].evidence.series[1] (nan)"]
