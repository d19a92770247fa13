"""scaling.bottleneck.<config> from plain data: run.bottleneck's verdict under each
configuration's id, and where the speed-up over one device went."""

from __future__ import annotations

import pytest
from test_verdicts_bottleneck import breakdown

from gpudiag.readers.steprecords import StepParts
from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts import scaling_bottleneck as sb

REPLICAS = ["/device:CPU:1", "/device:CPU:2"]
# one device: 10 ms, all compute but 1 ms of host
BASE = StepParts("mean", 0.010, 0.009, 0.0, 0.0, 0.001, 0.0)


def test_two_replicas_say_where_the_lost_time_went_part_by_part() -> None:
    # 16 ms a step: compute 11 (+2), all-reduce 3 (+3), host 1 (=), idle 1 (+1)
    two = breakdown(("/device:CPU:1", 16, 11, 3, 0, 1, 1, 0),
                    ("/device:CPU:2", 16, 11, 3, 0, 1, 1, 0))
    f = sb.scaling_bottleneck(sb.ConfigTrace("mirrored-2dev", two, None, REPLICAS, 2),
                              sb.Baseline(("mirrored-1dev", BASE)))
    assert f.id == "scaling.bottleneck.mirrored-2dev"
    # the same verdict run and explain give, under this id
    same = bn.bottleneck(two, None, bn.ProgramFacts(replicas=REPLICAS), check_id=f.id)
    assert f.status == same.status == "ok" and f.message.startswith(same.message)
    assert f.evidence["causes"] == same.evidence["causes"]
    lost = f.evidence["lost_speedup"]
    assert lost["lost_s_per_step"] == pytest.approx(0.006)
    assert lost["speedup_by_trace"] == pytest.approx(2 * 10 / 16)
    growth = lost["growth_s"]
    assert list(growth)[:3] == ["communication", "compute", "idle"]  # largest first
    assert growth["communication"] == pytest.approx(0.003)
    assert growth["compute"] == pytest.approx(0.002)
    assert sum(growth.values()) == pytest.approx(lost["lost_s_per_step"])  # every ms once
    assert ("lost speed-up: 16.0 ms per step against 10.0 ms on 1 device (mirrored-1dev), "
            "1.25x of 2x by the trace; the 6.00 ms went to communication (all-reduce) "
            "+3.00 ms, per-replica compute +2.00 ms, idle (waiting while another device "
            "worked) +1.00 ms") in f.message
    assert f.evidence["base"]["period_s"] == pytest.approx(0.010)


def test_a_communication_bound_configuration_warns_like_run_does() -> None:
    four = breakdown(*[(f"/device:CPU:{i}", 20, 9, 8, 0, 1, 2, 0) for i in range(1, 5)])
    f = sb.scaling_bottleneck(sb.ConfigTrace(
        "mirrored-4dev", four, None, [f"/device:CPU:{i}" for i in range(1, 5)], 4,
        gradient_bytes=8_000_000), sb.Baseline(("mirrored-1dev", BASE)))
    assert f.status == "warn" and f.evidence["causes"][0] == "communication-bound"
    # the gradient bytes over the all-reduce's time per step, as run.bottleneck says it
    assert f.evidence["allreduce"]["achieved_bytes_per_s"] == pytest.approx(8e6 / 0.008)
    assert "of gradients per replica per step (the sizes of its trainable variables) " \
        "all-reduced in 8.00 ms" in f.message
    assert "collectives (all-reduce) take 40 % of the step" in f.message
    assert f.advice.startswith("fewer, larger all-reduces")
    assert "2.00x of 4x by the trace" in f.message


def test_the_skew_between_replicas_is_stated_where_the_trace_has_it() -> None:
    two = breakdown(("/device:GPU:0", 12, 9, 1, 0, 1, 1, 0),
                    ("/device:GPU:1", 12, 9, 1, 0, 1, 1, 0), skew=0.0005,
                    source="device-plane")
    f = sb.scaling_bottleneck(sb.ConfigTrace("mirrored-2dev", two, None, ["GPU:0", "GPU:1"], 2),
                              sb.Baseline(("mirrored-1dev", BASE)))
    assert "the replicas started a step up to 0.500 ms apart" in f.message


def test_faster_than_one_device_loses_nothing() -> None:
    two = breakdown(("/device:CPU:1", 8, 7, 0, 0, 1, 0, 0), ("/device:CPU:2", 8, 7, 0, 0, 1, 0, 0))
    f = sb.scaling_bottleneck(sb.ConfigTrace("towers-2dev", two, None, REPLICAS, 2),
                              sb.Baseline(("towers-1dev", BASE)))
    assert "2.50x of 2x by the trace; nothing lost per step" in f.message


def test_without_a_trace_or_a_base_it_says_why() -> None:
    none = sb.scaling_bottleneck(sb.ConfigTrace(
        "towers-2dev", None, "no profiler window (--profile-steps 0)", REPLICAS, 2),
        sb.Baseline(("towers-1dev", BASE)))
    assert none.status == "skip" and none.id == "scaling.bottleneck.towers-2dev"
    assert none.message == ("towers-2dev: no trace to break down: no profiler window "
                            "(--profile-steps 0)")
    two = breakdown(("/device:CPU:1", 16, 11, 3, 0, 1, 1, 0),
                    ("/device:CPU:2", 16, 11, 3, 0, 1, 1, 0))
    alone = sb.scaling_bottleneck(sb.ConfigTrace("towers-2dev", two, None, REPLICAS, 2),
                                  sb.Baseline(None, "towers-1dev has no trace: no .xplane.pb "
                                              "under /x"))
    assert alone.evidence["lost_speedup"] is None
    assert alone.message.endswith("where the speed-up went: not compared (towers-1dev has no "
                                  "trace: no .xplane.pb under /x)")
    one = sb.scaling_bottleneck(sb.ConfigTrace("towers-1dev", two, None, REPLICAS[:1], 1))
    assert "lost_speedup" not in one.evidence and "speed-up" not in one.message


def test_the_evidence_has_every_devices_parts_in_seconds_for_the_picture() -> None:
    b = breakdown(("/device:GPU:0", 10, 6, 1, 1, 1, 1, 0), source="device-plane",
                  idle=("/device:GPU:1",))
    f = bn.bottleneck(b, None)
    parts = f.evidence["parts_s"]
    assert set(parts) == {"/device:GPU:0", "/device:GPU:1"}  # the idle GPU too
    assert parts["/device:GPU:0"] == pytest.approx(
        {"period_s": 0.010, "compute_s": 0.006, "communication_s": 0.001, "input_s": 0.001,
         "host_s": 0.001, "idle_s": 0.001, "host_between_calls_s": 0.0,
         "copy_s": 0.0, "host_call_edges_s": 0.0, "host_python_ops_s": 0.0})


def test_on_virtual_cpu_devices_the_numbers_are_said_to_be_theirs_not_the_gpus() -> None:
    """Issue 37: on virtual CPU devices sharing two cores the demo's red card said
    "communication-bound" with all-reduce advice. The same breakdown is now said as what it
    is: ok, no all-reduce advice, the cause kept for what it shows; on GPUs it stays a
    warn with its fix."""
    four = breakdown(*[(f"/device:CPU:{i}", 20, 9, 8, 0, 1, 2, 0) for i in range(1, 5)])
    replicas = [f"/device:CPU:{i}" for i in range(1, 5)]
    shared = sb.scaling_bottleneck(sb.ConfigTrace(
        "mirrored-4dev", four, None, replicas, 4, gradient_bytes=8_000_000,
        device_kind="virtual-cpu"), sb.Baseline(("mirrored-1dev", BASE)))
    assert shared.status == "ok"
    assert shared.message.startswith(
        "mirrored-4dev on 4 virtual CPU devices sharing this machine's cores: the numbers "
        "describe those devices, not a property of your GPUs; ")
    assert shared.evidence["causes"][0] == "communication-bound"
    assert shared.evidence["shared_cores"] is True
    assert "all-reduces" not in shared.advice and "batch per replica" not in shared.advice
    assert shared.advice == sb.SHARED_CORES_ADVICE
    one = sb.scaling_bottleneck(sb.ConfigTrace("mirrored-1dev", breakdown(
        ("/device:CPU:1", 10, 9, 0, 0, 1, 0, 0)), None, ["/device:CPU:1"], 1,
        device_kind="virtual-cpu"))
    assert one.message.startswith("mirrored-1dev on 1 virtual CPU device sharing")
    gpu = sb.scaling_bottleneck(sb.ConfigTrace(
        "mirrored-4dev", four, None, replicas, 4, gradient_bytes=8_000_000,
        device_kind="gpu"), sb.Baseline(("mirrored-1dev", BASE)))
    assert gpu.status == "warn" and gpu.advice.startswith("fewer, larger all-reduces")
    # the short verdict says the same
    from gpudiag.verdicts import headline
    line = headline.bottleneck_line({"findings": [shared.to_dict()]})
    assert line == "bottleneck: communication-bound, of virtual CPUs sharing cores: not your GPUs"
