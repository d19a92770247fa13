"""gpudiag.traces: interval arithmetic, attribution rules, and unreadable traces.

Real CPU traces written by TensorFlow's profiler are read in tests/e2e/test_train.py; here
the pure part is fed events shaped like XPlane's, GPU device planes included (no GPU
here to write one).
"""

from __future__ import annotations

import pytest

from gpudiag.readers import traces
from gpudiag.readers.traces import Event

MS = 1_000_000  # ns


def test_union_merges_overlaps_and_keeps_gaps() -> None:
    assert traces.union_s([]) == 0.0
    assert traces.union_s([(0, 2 * MS), (1 * MS, 3 * MS), (5 * MS, 6 * MS)]) == \
        pytest.approx(0.004)
    assert traces.union_s([(0, 10 * MS), (2 * MS, 3 * MS)]) == pytest.approx(0.010)


def host(name: str, start_ms: float, dur_ms: float, line: str = "tf_Compute/1") -> Event:
    return Event("/host:CPU", line, name, start_ms * MS, (start_ms + dur_ms) * MS)


def test_host_ops_are_attributed_to_the_device_they_were_placed_on() -> None:
    events = [
        host("train", 0, 10, line="python"),
        host("train", 10, 10, line="python"),
        host("tower_0/conv1/Conv2D:Conv2D", 1, 3),
        host("gradient_tape/tower_0/conv1/Conv2DBackpropFilter:Conv2DBackpropFilter", 2, 3),
        host("replica_1/tower_1/dense/MatMul:MatMul", 11, 2),
        host("average_gradients/Mean:Mean", 15, 1),
        host("sgd/CollectiveReduceV2:CollectiveReduceV2", 16, 2),
        host("IteratorGetNext:IteratorGetNext", 0, 1),
        host("IteratorGetNextOp::DoCompute", 10, 0.5, line="tf_data_iterator_get_next/1"),
        host("ExecutorState::Process", 0, 20),  # not an op event
        host("tower_0/late:Add", 50, 1),  # outside the step window
    ]
    placed = {  # the placement evidence: node name -> device TensorFlow ran it on
        "tower_0/conv1/Conv2D": "/device:CPU:1",
        "gradient_tape/tower_0/conv1/Conv2DBackpropFilter": "/device:CPU:1",
        "replica_1/tower_1/dense/MatMul": "/device:CPU:2",
        "tower_0/late": "/device:CPU:1",
    }
    s = traces.summarize_events("t.xplane.pb", ["/host:CPU"], events, placed,
                                ["/device:CPU:1", "/device:CPU:2", "/device:CPU:3"])
    assert s.step_markers == 2 and s.window_s == pytest.approx(0.020)
    busy = s.busy_by_device()
    assert busy == {"/device:CPU:1": pytest.approx(0.004), "/device:CPU:2": pytest.approx(0.002),
                    "/device:CPU:3": 0.0}
    assert s.input_wait_s == pytest.approx(0.0015)
    assert s.communication_s == pytest.approx(0.003)
    assert s.communication_fraction == pytest.approx(0.15)
    assert s.top_ops[0].name in {"Conv2D", "Conv2DBackpropFilter", "MatMul",
                                    "CollectiveReduceV2"}
    assert {o.name for o in s.top_ops} >= {"Conv2D", "MatMul", "IteratorGetNext"}


def test_a_tower_soft_placed_on_cpu0_counts_on_cpu0_not_by_its_name() -> None:
    """The bug seen on a real program: tower_1 ran on CPU:0 (its GPU did not exist) and the
    name-scope attribution said "86 % busy on CPU:1". The placement decides."""
    events = [
        host("train", 0, 10, line="python"),
        host("StatefulPartitionedCall/tower_0/MatMul:MatMul", 1, 4),
        host("StatefulPartitionedCall/tower_1/MatMul:MatMul", 5, 4),
        host("unknown/Op:Add", 9, 1),
    ]
    placed = {"tower_0/MatMul": "/device:CPU:0", "tower_1/MatMul": "/device:CPU:0"}
    s = traces.summarize_events("t", ["/host:CPU"], events, placed,
                                ["/device:CPU:1", "/device:CPU:2"])
    assert s.busy_by_device() == {"/device:CPU:0": pytest.approx(0.008),
                                  "/device:CPU:1": 0.0, "/device:CPU:2": 0.0}
    assert s.unattributed_s == pytest.approx(0.001)
    assert traces.device_of("StatefulPartitionedCall_2/PartitionedCall/tower_1/MatMul",
                            placed) == "/device:CPU:0"
    assert traces.device_of("tower_9/MatMul", placed) is None


def test_gpu_device_planes_win_over_host_launches() -> None:
    events = [
        host("train", 0, 10, line="python"),
        host("tower_0/MatMul:MatMul", 1, 0.1),
        host("tower_1/MatMul:MatMul", 1, 0.1),
        Event("/device:GPU:0", "Stream #14(Compute)", "volta_sgemm", 2 * MS, 6 * MS),
        Event("/device:GPU:0", "Stream #15(MemcpyH2D)", "memcpy", 5 * MS, 7 * MS),
        Event("/device:GPU:0", "TensorFlow Ops", "MatMul", 2 * MS, 6 * MS),  # derived line
        Event("/device:GPU:1", "Stream #14(Compute)", "volta_sgemm", 2 * MS, 3 * MS),
    ]
    s = traces.summarize_events("t", ["/host:CPU", "/device:GPU:0", "/device:GPU:1"], events,
                                {"tower_0/MatMul": "/device:GPU:0",
                                 "tower_1/MatMul": "/device:GPU:1"},
                                ["/device:GPU:0", "/device:GPU:1"])
    assert s.busy_by_device() == {"/device:GPU:0": pytest.approx(0.005),
                                  "/device:GPU:1": pytest.approx(0.001)}
    planes = [d for d in s.devices if d.source == "device-plane"]
    assert [d.busy_fraction for d in planes] == [pytest.approx(0.5), pytest.approx(0.1)]


def test_a_gpu_without_kernels_shows_as_missing_from_the_planes() -> None:
    events = [host("train", 0, 10, line="python"),
              Event("/device:GPU:0", "Stream #14(Compute)", "k", 1 * MS, 2 * MS)]
    s = traces.summarize_events("t", [], events, {}, ["/device:GPU:0", "/device:GPU:1"])
    busy = s.busy_by_device()
    assert busy.get("/device:GPU:1", 0.0) == 0.0 and busy["/device:GPU:0"] > 0


def test_unreadable_traces_raise_trace_error(tmp_path) -> None:
    with pytest.raises(traces.TraceError, match="no trace file"):
        traces.read_events(tmp_path / "missing.xplane.pb")
    bad = tmp_path / "host.xplane.pb"
    bad.write_bytes(b"\xff\xfe definitely not a protobuf \x00\x01" * 10)
    with pytest.raises(traces.TraceError):
        traces.read_events(bad)
    assert traces.find_xplanes(tmp_path) == [bad]
