"""gpudiag.tbplugin.views with plain data and the sample runs: what the dashboard's routes
answer, apart from the browser (tests/test_tbplugin_browser.py)."""

from __future__ import annotations

from conftest import REPO

from gpudiag.rundir import load_run
from gpudiag.tbplugin import views


def test_a_device_with_no_measured_busy_time_is_not_used() -> None:
    """Issue 37: a virtual device at 0 % busy was marked "used"."""
    assert views.lane_state(False, 0.37, None, 40, True) == "used"
    assert views.lane_state(False, 0.0002, None, None, False) == "idle"  # shown as 0 %
    assert views.lane_state(False, None, 0.0, 40, True) == "idle"  # the trace: no busy time
    assert views.lane_state(False, None, 0.002, None, True) == "used"
    assert views.lane_state(False, None, None, 40, True) == "not timed"  # ops, no trace
    assert views.lane_state(False, None, None, None, True) == "idle"
    assert views.lane_state(True, 0.5, 0.1, 40, True) == "idle"  # the finding says idle


def test_the_sample_scaling_runs_host_device_at_zero_percent_is_idle() -> None:
    (run_dir,) = (REPO / "sample_runs" / "scaling").iterdir()
    lanes = {lane["name"]: lane for lane in views.devices(load_run(run_dir))["lanes"]}
    host = lanes["/device:CPU:0"]
    assert host["busy_share"] < 0.005 and host["state"] == "idle"
    replicas = [lane for name, lane in lanes.items() if name.startswith("/device:CPU:")
                and name != "/device:CPU:0"]
    assert replicas and all(lane["state"] == "used" and lane["busy_share"] > 0.3
                            for lane in replicas)
