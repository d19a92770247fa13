"""The typed evidence (gpudiag.layout.evidence) decoded by load_run: every family that declares an
evidence type round-trips report.json -> load_run with its record, over the sample runs
and the golden GPU traces' explain runs; a field of the wrong kind is named; the step's
parts (STEP_PARTS, copy among them) add up to the step through load_run and in diff."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from helpers import REPO

from gpudiag import layout
from gpudiag.layout.compared import DiffStep
from gpudiag.layout.diff import CI_LEVEL
from gpudiag.layout.evidence import TYPES, Bottleneck, decode
from gpudiag.layout.families import FAMILIES, family_of
from gpudiag.rundir import Run, load_run

SAMPLES = sorted(p.parent for p in (REPO / "sample_runs").rglob(layout.REPORT_JSON))


def test_every_declared_evidence_type_has_its_record() -> None:
    declared = {f.evidence for f in FAMILIES if f.evidence}
    assert declared == set(TYPES)


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


@pytest.mark.parametrize("run_dir", SAMPLES, ids=lambda p: p.parent.name)
def test_each_sample_runs_findings_load_with_their_typed_evidence(run_dir: Path) -> None:
    typed(load_run(run_dir))


def test_the_sample_runs_hold_the_typed_families() -> None:
    kinds = {type(r).__name__ for d in SAMPLES for _, r in typed(load_run(d))}
    assert {"Bottleneck", "DeviceLanes", "Learning", "Scaling", "GpuUse"} <= kinds


def test_a_bottlenecks_parts_add_up_to_each_devices_step() -> None:
    for run_dir in SAMPLES:
        run = load_run(run_dir)
        for b in run.breakdown:
            assert isinstance(b.evidence, Bottleneck)
            for p in b.devices.values():
                assert sum(p.parts().values()) == pytest.approx(p.period_s, rel=1e-6)


@pytest.mark.parametrize(("data", "field"), [
    ({"step_s": "12 ms"}, "step_s"),
    ({"parts_s": {"/device:GPU:0": {"period_s": "10"}}}, "parts_s./device:GPU:0.period_s"),
    ({"parts_s": {"/device:GPU:0": 3}}, "parts_s./device:GPU:0"),
    ({"parts_s": {"/device:GPU:0": {"period_s": 0.1, "copy_s": "x"}}},
     "parts_s./device:GPU:0.copy_s"),
    ({"causes": "input-bound"}, "causes"),
    ({"predicted": {"step_s": "fast"}}, "predicted.step_s"),
])
def test_a_bottleneck_field_of_the_wrong_kind_is_named(data, field) -> None:
    with pytest.raises(ValueError, match=f"run.bottleneck: evidence field {field}"):
        decode("run.bottleneck", data)


@pytest.mark.parametrize(("finding_id", "data", "field"), [
    ("diff.step-time.fit", {"ratio": 0.5, "verdict": "faster", "a": {"median_s": 1},
                            "b": {"steps": 3}}, "b.median_s"),
    ("diff.step-time.fit", {"ratio": 0.5, "verdict": "quicker"}, "verdict"),
    ("run.learning", {"loops": [{"series": "fit", "weights_moved": "yes"}]},
     r"loops\[0\].weights_moved"),
    ("scaling.efficiency.mirrored", {"per_device_count": [{"speedup": 2}]},
     r"per_device_count\[0\].n_devices"),
    ("run.every-gpu-used", {"idle_indices": [0, "1"]}, "idle_indices"),
    ("run.every-device-used", {"ops_by_device": {"/cpu:0": "12"}}, "ops_by_device./cpu:0"),
])
def test_each_records_fields_are_checked(finding_id, data, field) -> None:
    with pytest.raises(ValueError, match=f"evidence field {field}"):
        decode(finding_id, data)


def test_a_diff_step_without_its_level_is_the_one_level_gpudiag_uses() -> None:
    data = {"name_a": "fit", "name_b": "fit", "a": {"median_s": 0.027, "low_s": 0.026,
                                                    "high_s": 0.028, "steps": 100},
            "b": {"median_s": 0.010, "low_s": None, "high_s": None, "steps": 100},
            "ratio": 0.376, "ratio_low": 0.368, "ratio_high": 0.385, "verdict": "faster"}
    d = decode("diff.step-time.fit", data)
    assert isinstance(d, DiffStep) and d.level == CI_LEVEL == 0.95
    assert d.speedup == pytest.approx(2.66, abs=0.01) and d.b.low_s is None
    assert decode("run.devices", {"anything": 1}) is None  # no evidence type declared
