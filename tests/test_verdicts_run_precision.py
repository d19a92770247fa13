"""run.precision (gpudiag.verdicts.run.precision) on plain data; and the mixed precision
guide's model under a real `gpudiag run` on this CPU, against its float32 twin timed
plainly (Keras's own ms/step)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import TESTS_DIR, findings_by_id, gpudiag, load_report, run_dirs

from gpudiag.records.run import (
    ConfigCall,
    DeviceSnapshot,
    ProcessObservation,
    Step,
    StepSeries,
)
from gpudiag.verdicts.run.precision import precision

PROGRAM = TESTS_DIR / "programs" / "mixed_precision_guide.py"


def _obs(policy: str | None, logical: list[str], gpus: list[dict[str, object]] | None = None,
         set_policy: bool = True, devices: bool = True) -> ProcessObservation:
    calls = [ConfigCall(0, "keras.mixed_precision.set_global_policy", [policy], {}, None,
                        {"file": "/u/train.py", "line": 7, "function": "<module>"}, None,
                        None)] if set_policy and policy else []
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


def _keras_ms_per_step(out: str) -> float:
    """Keras's own ms/step of the last epoch (its progress bar: ``7/7 ... 25ms/step``)."""
    found = re.findall(r"(\d+(?:\.\d+)?)(m?s)/step", out)
    value, unit = found[-1]
    return float(value) * (1000 if unit == "s" else 1)


@pytest.mark.slow
def test_the_guides_model_in_mixed_float16_on_this_cpu_against_its_float32_twin(
        tmp_path: Path) -> None:
    """The finding's step time is the program's, and the float32 twin, timed plainly, is
    faster several times over (here: 25 ms against 980 ms, about 40x, under load)."""
    twin = subprocess.run([sys.executable, str(PROGRAM), "float32"], capture_output=True,
                          text=True, timeout=300)
    assert twin.returncode == 0, twin.stderr[-2000:]
    float32_ms = _keras_ms_per_step(twin.stdout)
    logdir = tmp_path / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), "--profile-steps", "0", "--",
                   sys.executable, str(PROGRAM), "mixed_float16", timeout=300)
    (run_dir,) = run_dirs(logdir)
    found = findings_by_id(load_report(run_dir))
    f = found["run.precision"]
    line = next(i for i, text in enumerate(PROGRAM.read_text().splitlines(), 1)
                if "set_global_policy(policy)" in text)
    assert proc.returncode == 0 and f["status"] == "warn"
    assert f"the mixed_float16 policy (set at mixed_precision_guide.py:{line}) on the CPU " \
        "only" in f["message"]
    assert f["evidence"]["step_s_median"] * 1e3 > 3 * float32_ms, (f, float32_ms)
    assert "drop the set_global_policy('mixed_float16')" in f["advice"]
