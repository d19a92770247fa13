"""The checked-in sample runs are valid reports, and their evidence re-derives."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
from helpers import REPO, load_report

import gpudiag
from gpudiag.readers.placementlog import op_counts_by_device, parse

SCHEMA = json.loads((Path(gpudiag.__file__).parent / "report.schema.json").read_text())
REPORTS = sorted((REPO / "sample_runs").glob("*/*/report.json"))


def test_there_are_sample_runs() -> None:
    commands = {load_report(p.parent)["command"] for p in REPORTS}
    assert {"env", "placement", "memory", "monitor", "scaling"} <= commands


@pytest.mark.parametrize("path", REPORTS, ids=lambda p: f"{p.parent.parent.name}/{p.parent.name}")
def test_sample_report_is_valid_and_complete(path: Path) -> None:
    report = load_report(path.parent)
    jsonschema.validate(report, SCHEMA)
    assert report["partial"] is False
    assert (path.parent / "report.md").exists()


def test_placement_sample_counts_rederive_from_its_log() -> None:
    (path,) = [p for p in REPORTS if load_report(p.parent)["command"] == "placement"]
    report = load_report(path.parent)
    log = (path.parent / "children" / "placement" / "stderr.txt").read_text()
    assert op_counts_by_device(parse(log)) == report["data"]["placement"]["op_counts_by_device"]


@pytest.mark.slow
def test_scaling_sample_traces_show_every_tower_device_busy() -> None:
    """The checked-in 4-device towers trace, read again through xprof, shows all 4 busy,
    each op attributed to the device its step graph assigned it (not by its name)."""
    from gpudiag.readers import traces
    from gpudiag.records.training import CountResult

    (path,) = [p for p in REPORTS if load_report(p.parent)["command"] == "scaling"]
    (xplane,) = traces.find_xplanes(path.parent / "towers-4dev")
    # one child per device count (both strategies in it): the 4-device child's towers run
    result = json.loads((path.parent / "children" / "scaling-4dev" / "result.json").read_text())
    (towers,) = [o for o in CountResult.from_dict(result["result"]).outcomes
                 if o.strategy == "towers"]
    assert towers.result is not None
    placed = towers.result.train.op_devices
    devices = [f"/device:CPU:{i}" for i in range(1, 5)]
    busy = {d: s for d, s in traces.summarize(xplane, placed, devices).busy_by_device().items()
            if d in devices}
    assert sorted(busy) == devices
    assert all(seconds > 0 for seconds in busy.values()), busy
