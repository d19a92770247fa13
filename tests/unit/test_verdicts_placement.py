"""Placement verdicts from plain data: parsed placement rows and the probe's result."""

from __future__ import annotations

from dataclasses import replace

from gpudiag.readers.placementlog import PlacementRow
from gpudiag.records.results import (
    InvalidPinResult,
    MultitowerResult,
    NoKernelPin,
    Pin,
    PinnedResult,
    SoftPinResult,
)
from gpudiag.verdicts import placement as verdicts

CPU0, CPU1, GPU0 = "/device:CPU:0", "/device:CPU:1", "/device:GPU:0"


def _row(op: str, device: str, op_type: str = "MatMul", kind: str = "graph") -> PlacementRow:
    return PlacementRow(kind, op, op_type, device, "__inference_f_1" if kind == "graph" else None)


def test_empty_placement_log_fails() -> None:
    f = verdicts.placement_log([_row("x", CPU0, "_Arg")], "virtual-cpu")
    assert f.status == "fail" and "empty" in f.message


def test_default_device_on_gpu_machine_fails_when_work_went_to_cpu() -> None:
    rows = [_row("mm", CPU0), _row("add", CPU0, "AddV2")]
    assert verdicts.default_device(rows, "gpu", CPU0).status == "fail"
    ok = verdicts.default_device([_row("mm", GPU0), _row("c", CPU0, "Const")], "gpu", CPU0)
    assert ok.status == "ok" and "1 of 2" in ok.message
    assert verdicts.default_device(rows, "virtual-cpu", CPU0).status == "warn"


def test_pinned_op_landing_elsewhere_fails_and_names_it() -> None:
    result = PinnedResult([CPU0, CPU1], [Pin(CPU0, CPU0), Pin(CPU1, CPU0)],
                          {"pinned_0": CPU0, "pinned_1": CPU1})
    rows = [_row("pinned_0", CPU0), _row("pinned_1", CPU1)]
    f = verdicts.pinned(result, rows)
    assert f.status == "fail" and f"pinned to {CPU1} ran on {CPU0}" in f.message
    result = replace(result, eager=[Pin(CPU0, CPU0), Pin(CPU1, CPU1)])
    assert verdicts.pinned(result, rows).status == "ok"
    assert verdicts.pinned(result, rows[:1]).status == "fail"  # node missing from the log


def test_invalid_device_verdict_quotes_the_error() -> None:
    raised = InvalidPinResult("/device:GPU:2", raised=True, error_type="InvalidArgumentError",
                              message="Could not satisfy device specification")
    f = verdicts.invalid_device(raised)
    assert f.status == "ok" and "Could not satisfy device specification" in f.message
    assert f.evidence["error_type"] == "InvalidArgumentError"
    silent = InvalidPinResult("/device:GPU:2", raised=False, actual=CPU0)
    assert verdicts.invalid_device(silent).status == "fail"


def test_soft_fallback_and_no_gpu_kernel() -> None:
    assert verdicts.soft_fallback(SoftPinResult(GPU0, CPU0, True)).status == "ok"
    assert verdicts.soft_fallback(SoftPinResult(GPU0, GPU0, True)).status == "fail"
    assert verdicts.no_gpu_kernel(None).status == "skip"
    moved = NoKernelPin("AsString", GPU0, CPU0)
    assert verdicts.no_gpu_kernel(moved).status == "ok"
    assert verdicts.no_gpu_kernel(replace(moved, actual=GPU0)).status == "fail"


def test_multitower_checks_value_and_every_part() -> None:
    result = MultitowerResult([CPU1, "/device:CPU:2"], CPU0, max_relative_error=1e-7,
                              value_ok=True)
    rows = [_row("tower_0/MatMul", CPU1), _row("tower_1/MatMul", "/device:CPU:2"),
            _row("tower_sum", CPU0, "AddN")]
    assert verdicts.multitower(result, rows).status == "ok"
    wrong = [rows[0], _row("tower_1/MatMul", CPU1), rows[2]]
    f = verdicts.multitower(result, wrong)
    assert f.status == "fail" and "tower_1/MatMul" in f.message
    bad_value = verdicts.multitower(replace(result, value_ok=False, max_relative_error=0.5), rows)
    assert bad_value.status == "fail" and "sum wrong" in bad_value.message


def test_device_kinds_are_read_from_any_spelling_of_the_name() -> None:
    long_cpu = "/job:localhost/replica:0/task:0/device:CPU:0"
    moved = NoKernelPin("AsString", "/GPU:0", long_cpu)
    assert verdicts.no_gpu_kernel(moved).status == "ok"
    assert verdicts.no_gpu_kernel(replace(moved, actual="/job:localhost/device:gpu:0")).status \
        == "fail"
    rows = [_row("mm", "/job:localhost/replica:0/task:0/device:GPU:0"), _row("c", CPU0, "Const")]
    assert verdicts.default_device(rows, "gpu", CPU0).status == "ok"
