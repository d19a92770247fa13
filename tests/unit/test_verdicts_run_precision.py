"""run.precision (gpudiag.verdicts.run.precision) on plain data; and the mixed precision
guide's model under a real `gpudiag run` on this CPU, against its float32 twin timed
plainly (Keras's own ms/step)."""

from __future__ import annotations

from gpudiag.layout.events import ConfigCall
from gpudiag.records.run import (
    DeviceSnapshot,
    ProcessObservation,
    Step,
    StepSeries,
)
from gpudiag.verdicts.run.precision import precision


def _obs(policy: str | None, logical: list[str], gpus: list[dict[str, object]] | None = None,
         set_policy: bool = True, devices: bool = True) -> ProcessObservation:
    calls = [ConfigCall(order=0, api="keras.mixed_precision.set_global_policy", args=[policy],
                        caller={"file": "/u/train.py", "line": 7, "function": "<module>"})
             ] if set_policy and policy else []
    steps = [Step(i, 100.0 + i, 0.25, 2.0) for i in range(9)]
    fit = StepSeries("fit", "Model.fit", steps, 256, 10, {"dtype_policy": policy})
    return ProcessObservation(
        pid=1, ppid=None, argv=["train.py"], start_env={}, config_calls=calls, series=[fit],
        devices=DeviceSnapshot("fit", [], logical, gpus or [], True, True) if devices
        else None)


def test_a_16_bit_policy_on_the_cpu_is_named_with_its_line_and_cost() -> None:
    f = precision(_obs("mixed_float16", ["/device:CPU:0"]))
    assert f is not None and f.id == "run.precision" and f.status == "warn"
    assert f.message.startswith("the mixed_float16 policy (set at train.py:7) on the CPU "
                                "only (no GPU visible)")
    assert "about 40x slower per step than float32" in f.message
    assert "Model.fit's step took 250.0 ms (median of 8)" in f.message
    assert "drop the set_global_policy('mixed_float16') call at train.py:7" in f.advice
    # bfloat16 on a CPU went both ways here (AVX512_BF16/AMX): said, measured, not warned
    bf = precision(_obs("mixed_bfloat16", ["/device:CPU:0"]))
    assert bf is not None and bf.status == "ok" and "1.2x faster at batch 8192" in bf.message
    assert bf.advice.startswith("Time one epoch with the policy and one without")


def test_on_gpus_the_compute_capability_decides() -> None:
    def gpu(cc: list[int]) -> list[dict[str, object]]:
        return [{"name": "/physical_device:GPU:0", "details": {"compute_capability": cc}}]

    old = precision(_obs("mixed_float16", ["/device:CPU:0", "/device:GPU:0"], gpu([6, 1])))
    assert old is not None and old.status == "warn"
    assert "GPU:0 (compute capability 6.1): below compute capability 7.0" in old.message
    volta = precision(_obs("mixed_float16", ["/device:CPU:0", "/device:GPU:0"], gpu([7, 0])))
    assert volta is not None and volta.status == "ok"
    turing_bf16 = precision(_obs("mixed_bfloat16", ["/device:GPU:0"], gpu([7, 5])))
    assert turing_bf16 is not None and turing_bf16.status == "warn"
    assert "below compute capability 8.0" in turing_bf16.message
    unknown = precision(_obs("mixed_float16", ["/device:GPU:0"], [{"name": "x"}]))
    assert unknown is not None and unknown.status == "skip"


def test_nothing_said_without_a_16_bit_policy_and_skip_without_devices() -> None:
    assert precision(_obs("float32", ["/device:CPU:0"])) is None
    assert precision(_obs(None, ["/device:CPU:0"])) is None
    unseen = precision(_obs("mixed_float16", [], devices=False))
    assert unseen is not None and unseen.status == "skip"
    assert "devices were never listed" in unseen.message
    # a policy given to the model without the global setter: the fit's own policy, no line
    f = precision(_obs("mixed_float16", ["/device:CPU:0"], set_policy=False))
    assert f is not None and "(set at" not in f.message
    assert "set_global_policy('float32')" in f.advice
