"""The finding families (gpudiag.layout.families) against docs/findings.md (written from them by
scripts/findings_doc.py) and the sample runs, and the typed finding's round trip through
report.json (gpudiag.report)."""

from __future__ import annotations

import importlib.util
import json
import re
import tomllib
from pathlib import Path

import jsonschema
import pytest
from helpers import REPO

from gpudiag import layout
from gpudiag.layout.families import FAMILIES, QUESTIONS, TITLE_MAX, family_of, question_of
from gpudiag.report import Action, Finding, Prediction, Report
from gpudiag.rundir import load_run

SCHEMA = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())
_ID = re.compile(r"`((?:[a-z][a-z0-9-]*|<command>)\.[a-z0-9.<>_-]+)(?:\[[^\]]*\])?`")


def docs_ids() -> set[str]:
    """Every finding id named in the first cell of a row of docs/findings.md's tables."""
    ids: set[str] = set()
    for line in (REPO / "docs" / "findings.md").read_text().splitlines():
        if line.startswith("| `"):
            first = line.split("|")[1]
            ids.update(_ID.findall(first))
    return ids


def test_every_family_has_its_docs_row_and_every_row_its_family() -> None:
    declared = {f.id for f in FAMILIES}
    documented = docs_ids()
    assert declared - documented == set(), "families without a row in docs/findings.md"
    assert documented - declared == set(), "docs rows without a family in gpudiag.layout.families"


def _findings_doc():
    spec = importlib.util.spec_from_file_location("findings_doc",
                                                  REPO / "scripts" / "findings_doc.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_findings_md_is_what_the_registry_and_its_prose_write() -> None:
    """docs/findings.md is current: `python scripts/findings_doc.py` writes it again."""
    doc = _findings_doc()
    text = tomllib.loads(doc.TEXT.read_text())
    assert doc.prose_problems(text) == []
    assert (REPO / "docs" / "findings.md").read_text() == doc.render(text)


def test_a_family_without_prose_and_prose_without_a_family_are_named() -> None:
    doc = _findings_doc()
    text = tomllib.loads(doc.TEXT.read_text())
    del text["family"]["run.crash"]
    text["family"]["run.nothing"] = {"checks": "x", "not_ok": "y"}
    assert doc.prose_problems(text) == [
        "no entry in scripts/findings.toml for run.crash",
        "scripts/findings.toml: run.nothing is no family of gpudiag.layout.families"]


def test_every_family_answers_a_known_question_and_is_declared_once() -> None:
    bases = [f.base for f in FAMILIES]
    assert len(bases) == len(set(bases))
    assert {f.question for f in FAMILIES} <= set(QUESTIONS)


@pytest.mark.parametrize(("finding_id", "family", "question"), [
    ("run.devices", "run.devices", "devices"),
    ("run.devices.p2", "run.devices", "devices"),
    ("run.retracing.worker-0", "run.retracing", "why_slow"),
    ("run.eager-loop", "run.eager-loop", "why_slow"),
    ("run.callbacks.p1", "run.callbacks", "why_slow"),
    ("scaling.devices", "scaling.devices", "devices"),
    ("scaling.devices-worked.towers-2dev", "scaling.devices-worked.<config>", "devices"),
    ("scaling.efficiency.mirrored", "scaling.efficiency.<strategy>", "scaling"),
    ("explain.bottleneck.run1.host", "explain.bottleneck", "why_slow"),
    ("diff.step-time.program", "diff.step-time.<loop>", "did_the_fix_work"),
    ("cluster.scaling.sync-b64", "cluster.scaling.<mode>-b<batch>", "scaling"),
    ("scaling.error", "<command>.error", "program"),
    ("run.error", "<command>.error", "program"),
])
def test_an_id_finds_its_family_by_its_dotted_prefix(finding_id, family, question) -> None:
    found = family_of(finding_id)
    assert found is not None and found.id == family
    assert question_of(finding_id) == question


@pytest.mark.parametrize("finding_id", ["scaling.efficiency", "nothing.here", "run"])
def test_an_id_of_no_family_has_no_question(finding_id) -> None:
    assert family_of(finding_id) is None
    assert Finding(finding_id, "ok", "m").question is None


def test_every_sample_run_finding_belongs_to_a_family() -> None:
    runs = [p.parent for p in (REPO / "sample_runs").rglob(layout.REPORT_JSON)]
    assert runs
    for run_dir in runs:
        for f in load_run(run_dir).report.findings:
            assert f.question in QUESTIONS, f"{run_dir}: {f.id}"


def test_a_typed_finding_round_trips_through_report_json(tmp_path: Path) -> None:
    action = Action("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
                    "train.py:33", Prediction(0.0174, 0.0151, 0.0199, "parallel map on 2 cores"))
    finding = Finding("run.bottleneck", "warn", "the whole sentence " * 20,
                      {"causes": ["input-bound"]}, "advice",
                      title="input-bound: 47 % of a 32.6 ms step waits for tf.data",
                      actions=(action, Action("cache the dataset")))
    assert finding.question == "why_slow"
    report = Report(command="run", run_dir=str(tmp_path), findings=[finding])
    from gpudiag.reportmd import save

    save(report, tmp_path)
    data = json.loads((tmp_path / layout.REPORT_JSON).read_text())
    jsonschema.validate(data, SCHEMA)
    assert data["schema_version"] == layout.SCHEMA_VERSION == 2
    back = load_run(tmp_path).report.findings[0]
    assert back == finding
    assert back.actions[0].predicted == action.predicted


def test_a_version_1_report_still_loads_with_its_families_questions(tmp_path: Path) -> None:
    report = {"schema_version": 1, "gpudiag_version": "0.1.0", "command": "run", "argv": [],
              "run_dir": str(tmp_path), "started_at": "2026-11-20T10:00:00+00:00",
              "finished_at": "2026-11-20T10:01:00+00:00", "partial": False,
              "interrupted": False, "summary": {"ok": 1, "warn": 0, "fail": 0, "skip": 0},
              "environment": {}, "devices": {}, "data": {},
              "findings": [{"id": "run.retracing", "status": "ok", "message": "no retracing",
                            "evidence": {}, "advice": ""}]}
    jsonschema.validate(report, SCHEMA)
    (tmp_path / layout.REPORT_JSON).write_text(json.dumps(report))
    (f,) = load_run(tmp_path).report.findings
    assert (f.question, f.title, f.actions, f.headline) == ("why_slow", "", (), "no retracing")


@pytest.mark.parametrize("title", ["x" * (TITLE_MAX + 1), "two\nlines"])
def test_a_title_is_one_short_line(title: str) -> None:
    with pytest.raises(ValueError, match="title"):
        Finding("run.learning", "ok", "m", title=title)
