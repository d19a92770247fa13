"""The GPUDIAG tab agrees with itself (issue 44): what one card says of a run, another
card of the same run says with the same numbers (gpudiag.tbplugin.views, on the recorded
sample runs; no process, no TensorFlow)."""

from __future__ import annotations

import pytest
from helpers import REPO

from gpudiag.rundir import load_run
from gpudiag.tbplugin import views

SAMPLE = REPO / "sample_runs"


def test_a_devices_busy_share_is_its_step_bars_busy_parts() -> None:
    """The sample run's /host:CPU row: 30 % of its bar is the host's own work (Python
    between the steps, dispatch), so its lane is used at that share, not idle at 0 %."""
    (run_dir,) = (SAMPLE / "run").iterdir()
    run = load_run(run_dir)
    lanes = {lane["name"]: lane for lane in views.devices(run)["lanes"]}
    bars = {b["device"]: b for b in (views.bottleneck(run) or {})["bars"]}
    assert set(bars) <= set(lanes)
    for device, bar in bars.items():
        lane = lanes[device]
        busy = sum(bar["parts_ms"][p] for p in lane["busy_parts"]) / bar["step_ms"]
        assert lane["busy_share"] == pytest.approx(busy), device
    host = lanes["/host:CPU"]
    assert host["busy_parts"] == ["compute", "communication", "copy", "host"]
    assert host["busy_share"] > 0.25 and host["state"] == "used", host
    assert lanes["/device:CPU:0"]["busy_parts"] == ["compute", "communication", "copy"]
