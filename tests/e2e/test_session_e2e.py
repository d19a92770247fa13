"""Run directories, reports and the TensorBoard text summary, on real files."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from helpers import load_report
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

import gpudiag
from gpudiag.report import Finding
from gpudiag.session import RunSession

SCHEMA = json.loads((Path(gpudiag.__file__).parent / "report.schema.json").read_text())


def _texts(run: Path) -> dict[str, str]:
    acc = EventAccumulator(str(run), size_guidance={"tensors": 0})
    acc.Reload()
    return {tag: acc.Tensors(tag)[-1].tensor_proto.string_val[0].decode()
            for tag in acc.Tags()["tensors"]}


def test_complete_session_writes_valid_report_and_tensorboard_text(tmp_path: Path) -> None:
    with RunSession("placement", tmp_path / "runs") as s:
        s.add(Finding("placement.log", "ok", "parsed", {"n": 3}, title="parsed"))
        s.add(Finding("placement.pinned", "fail", "pinned | wrong", {}, advice="fix it",
                      title="a pinned op ran elsewhere"))
        s.text("gpudiag/placement", "| a | b |\n|---|---|\n| 1 | 2 |")
    report = load_report(s.run_dir)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is False and report["summary"]["fail"] == 1
    assert s.report.exit_code() == 1
    md = (s.run_dir / "report.md").read_text()
    assert "What to do: fix it" in md and "pinned \\| wrong" in md
    texts = _texts(s.run_dir / "report")
    assert "placement.pinned" in texts["gpudiag/report"]
    assert texts["gpudiag/placement"].startswith("| a | b |")
