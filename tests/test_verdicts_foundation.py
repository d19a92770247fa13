"""Placement and env verdicts from plain data."""

from __future__ import annotations

from gpudiag import verdicts
from gpudiag.placementlog import PlacementRow

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
    result = {"targets": [CPU0, CPU1],
              "eager": [{"requested": CPU0, "actual": CPU0}, {"requested": CPU1, "actual": CPU0}],
              "graph_nodes": {"pinned_0": CPU0, "pinned_1": CPU1}}
    rows = [_row("pinned_0", CPU0), _row("pinned_1", CPU1)]
    f = verdicts.pinned(result, rows)
    assert f.status == "fail" and f"pinned to {CPU1} ran on {CPU0}" in f.message
    result["eager"][1]["actual"] = CPU1
    assert verdicts.pinned(result, rows).status == "ok"
    assert verdicts.pinned(result, rows[:1]).status == "fail"  # node missing from the log


def test_invalid_device_verdict_quotes_the_error() -> None:
    raised = {"requested": "/device:GPU:2", "raised": True, "error_type": "InvalidArgumentError",
              "message": "Could not satisfy device specification"}
    f = verdicts.invalid_device(raised)
    assert f.status == "ok" and "Could not satisfy device specification" in f.message
    silent = {"requested": "/device:GPU:2", "raised": False, "actual": CPU0}
    assert verdicts.invalid_device(silent).status == "fail"


def test_soft_fallback_and_no_gpu_kernel() -> None:
    assert verdicts.soft_fallback({"requested": GPU0, "actual": CPU0}, CPU0).status == "ok"
    assert verdicts.no_gpu_kernel(None).status == "skip"
    moved = {"op": "AsString", "requested": GPU0, "actual": CPU0}
    assert verdicts.no_gpu_kernel(moved).status == "ok"
    assert verdicts.no_gpu_kernel({**moved, "actual": GPU0}).status == "fail"


def test_multitower_checks_value_and_every_part() -> None:
    result = {"towers": [CPU1, "/device:CPU:2"], "host": CPU0, "max_relative_error": 1e-7,
              "value_ok": True}
    rows = [_row("tower_0/MatMul", CPU1), _row("tower_1/MatMul", "/device:CPU:2"),
            _row("tower_sum", CPU0, "AddN")]
    assert verdicts.multitower(result, rows).status == "ok"
    wrong = [rows[0], _row("tower_1/MatMul", CPU1), rows[2]]
    f = verdicts.multitower(result, wrong)
    assert f.status == "fail" and "tower_1/MatMul" in f.message
    bad_value = verdicts.multitower({**result, "value_ok": False, "max_relative_error": 0.5}, rows)
    assert bad_value.status == "fail" and "sum wrong" in bad_value.message


def _tf(gpus: int, cuda: bool = True, cvd: str | None = None) -> dict:
    return {"tf_version": "2.21.0",
            "build_info": {"is_cuda_build": cuda, "cuda_version": "12.5.1", "cudnn_version": "9",
                           "cuda_compute_capabilities": ["sm_80"]},
            "physical_gpus": [{"index": i, "name": f"/physical_device:GPU:{i}",
                               "device_name": "NVIDIA H100", "compute_capability": [9, 0]}
                              for i in range(gpus)],
            "env": {"CUDA_VISIBLE_DEVICES": cvd}}


def _nvml(n: int) -> dict:
    return {"backend": "fake", "devices": [{"index": i, "name": "NVIDIA H100",
                                            "pci_bus_id": f"00000000:0{i}:00.0"}
                                           for i in range(n)]}


def _by_id(findings: list) -> dict:
    return {f.id: f for f in findings}


def test_env_no_gpu_anywhere_warns_and_skips_nvml() -> None:
    f = _by_id(verdicts.env_findings(_tf(0), None, "libnvidia-ml.so.1 not found", []))
    assert f["env.nvml"].status == "skip" and "libnvidia-ml" in f["env.nvml"].message
    assert f["env.tf-gpus"].status == "warn"
    assert "env.gpu-count" not in f


def test_env_cpu_only_build_on_gpu_machine_fails() -> None:
    f = _by_id(verdicts.env_findings(_tf(0, cuda=False), _nvml(2), None, []))
    assert f["env.tensorflow"].status == "fail" and "CPU-only" in f["env.tensorflow"].message
    assert f["env.tf-gpus"].status == "fail"


def test_env_tf_seeing_fewer_gpus_than_nvml_fails() -> None:
    f = _by_id(verdicts.env_findings(_tf(1), _nvml(2), None, []))
    assert f["env.gpu-count"].status == "fail"
    assert "1 GPU(s) but 2" in f["env.gpu-count"].message


def test_env_cuda_visible_devices_hiding_gpus_is_named() -> None:
    f = _by_id(verdicts.env_findings(_tf(1, cvd="1"), _nvml(4), None, []))
    assert f["env.cuda-visible-devices"].status == "warn"
    assert "hides 3 of 4" in f["env.cuda-visible-devices"].message
    assert "env.gpu-count" not in f  # TF sees exactly what CUDA lets it see


def test_visible_count_follows_cuda_rules() -> None:
    assert verdicts.visible_count(None, 4) == 4
    assert verdicts.visible_count("", 4) == 0
    assert verdicts.visible_count("0,2", 4) == 2
    assert verdicts.visible_count("0,9,1", 4) == 1  # parsing stops at the first invalid index
    assert verdicts.visible_count("GPU-abc", 2) == 1


def test_gpu_log_lines_pick_the_cuda_reasons() -> None:
    stderr = "I port.cc] oneDNN on\nI cudart_stub.cc:31] Could not find cuda drivers\nother\n"
    assert verdicts.gpu_log_lines(stderr) == ["I cudart_stub.cc:31] Could not find cuda drivers"]
