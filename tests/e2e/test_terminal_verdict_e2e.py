"""The terminal ends with the verdict: at most six lines under 80 columns, above nothing
else of gpudiag's; on a machine where TensorFlow lists no GPU it says the work ran on the
CPU and why, from the recorded evidence, and never "all checks passed"
(gpudiag.verdicts.headline, gpudiag.execute and its render_table, gpudiag.scaling.table)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from helpers import gpudiag, load_report, run_dirs

COLUMNS_80 = {"COLUMNS": "80", "TERM": "dumb"}


def _tail(out: str) -> list[str]:
    """The verdict: the lines after the last blank line."""
    return out.rstrip("\n").split("\n\n")[-1].splitlines()


def _entries(lines: list[str]) -> list[str]:
    """The verdict's entries, each whole: a wrapped entry's lines (indented) joined."""
    out: list[str] = []
    for ln in lines:
        if ln.startswith(" ") and out:
            out[-1] += " " + ln.strip()
        else:
            out.append(ln)
    return out


def _no_gpu_here() -> bool:
    return not any(Path(d).joinpath("libnvidia-ml.so.1").exists() for d in (
        "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"))


def test_env_ends_with_the_verdict_naming_the_cpu_and_why(tmp_path: Path) -> None:
    if not _no_gpu_here():
        pytest.skip("an NVIDIA driver is installed here: the no-GPU verdict does not apply")
    proc = gpudiag("env", "--logdir", "runs", env=COLUMNS_80, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr
    (run_dir,) = (d.relative_to(tmp_path) for d in run_dirs(tmp_path / "runs"))
    verdict = _tail(proc.stdout)
    assert len(verdict) <= 6 and all(len(ln) < 80 for ln in verdict), verdict
    assert verdict[0].startswith("gpudiag env: 0 failed"), verdict
    assert verdict[1] == "devices: no GPU, ran on the CPU (/device:CPU:0): no NVIDIA driver"
    assert verdict[-2:] == [f"report: {run_dir / 'report.md'}",
                            "dashboard: gpudiag tensorboard runs"]
    assert "all checks passed" not in (proc.stdout + proc.stderr).lower()
    # every line gpudiag printed fits 80 columns and none is cut; each finding is shown
    # whole by its id and its title (or, without one, its message), wrapped
    lines = proc.stdout.splitlines()
    assert all(len(ln) < 80 and not ln.rstrip().endswith(("...", "\u2026")) for ln in lines), \
        proc.stdout
    shown = " ".join(" ".join(lines).split())
    report = load_report(tmp_path / run_dir)
    for f in report["findings"]:
        words = " ".join((f["title"] or f["message"]).split())
        assert f"{f['id']}: {words}" in shown, f["id"]


def test_run_of_a_keras_fit_names_device_bottleneck_and_learning(tmp_path: Path) -> None:
    proc = gpudiag("run", "--logdir", "runs", "--", sys.executable, "-m",
                   "gpudiag.examples.keras_mnist_like", env=COLUMNS_80, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = _tail(proc.stderr)  # `run`: stdout is the program's
    assert all(len(ln) < 80 for ln in lines), lines
    verdict = _entries(lines)
    assert [ln.split(":")[0] for ln in verdict] == [
        "gpudiag run", "devices", "bottleneck", "learning", "report", "dashboard"]
    if _no_gpu_here():
        assert verdict[1].startswith("devices: no GPU, ran on the CPU ("), verdict
        assert verdict[1].endswith(": no NVIDIA driver"), verdict
    assert "ms step" in verdict[2]
    assert verdict[3].startswith("learning: ") and "loss " in verdict[3], verdict  # title
    assert "all checks passed" not in proc.stderr.lower()
