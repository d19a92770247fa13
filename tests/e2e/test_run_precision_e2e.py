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

PROGRAM = TESTS_DIR / "programs" / "mixed_precision_guide.py"


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
