"""Env verdicts from plain data: the env probe's result beside NVML's inventory."""

from __future__ import annotations

from gpudiag.records.results import EnvResult
from gpudiag.verdicts import env as verdicts


def _tf(gpus: int, cuda: bool = True, cvd: str | None = None) -> EnvResult:
    physical_gpus = [{"index": i, "name": f"/physical_device:GPU:{i}",
                      "device_name": "NVIDIA H100", "compute_capability": [9, 0]}
                     for i in range(gpus)]
    return EnvResult(
        tf_version="2.21.0", keras_version="3.10.0",
        build_info={"is_cuda_build": cuda, "cuda_version": "12.5.1", "cudnn_version": "9",
                    "cuda_compute_capabilities": ["sm_80"]},
        is_built_with_cuda=cuda, is_built_with_gpu_support=cuda,
        physical_devices=[{"name": "/physical_device:CPU:0", "device_type": "CPU"}]
        + [{"name": g["name"], "device_type": "GPU"} for g in physical_gpus],
        physical_gpus=physical_gpus,
        logical_devices=[{"name": "/device:CPU:0", "device_type": "CPU"}],
        soft_device_placement=True,
        env={"CUDA_VISIBLE_DEVICES": cvd})


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
    from gpudiag import catalogue  # env reads TensorFlow's log through the shared catalogue

    line = ("I0000 00:00:1795326986.458645   30884 cudart_stub.cc:31] Could not find cuda "
            "drivers on your machine, GPU will not be used.")
    stderr = f"I port.cc] oneDNN on\n{line}\nother\n"
    assert catalogue.gpu_log_lines(stderr) == [line]
