"""Where each step's time goes, from traces: a public 8-GPU trace (tests/data/, its source
in the README beside it) and plain events with known answers."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import TESTS_DIR

from gpudiag.readers import intervals as iv
from gpudiag.readers import stepbreakdown as sb
from gpudiag.readers.traces import Event

BERT = TESTS_DIR / "data" / "xprof_demo_gpu_multi_worker" / "34.83.195.179_6003.xplane.pb"
MS = 1e6  # ns


@pytest.fixture(scope="module")
def bert() -> sb.Breakdown:
    return sb.breakdown(BERT)


def test_every_gpu_of_the_8_gpu_trace_is_listed_and_the_6_without_kernels_named(
        bert: sb.Breakdown) -> None:
    assert [d.device for d in bert.devices] == [f"/device:GPU:{i}" for i in range(8)]
    assert bert.gpus_without_kernels == [f"/device:GPU:{i}" for i in (0, 1, 2, 3, 5, 7)]
    ran = {d.device: d for d in bert.devices if d.ran_kernels}
    assert set(ran) == {"/device:GPU:4", "/device:GPU:6"}
    assert ran["/device:GPU:4"].kernels == 665


def test_steps_from_the_device_steps_line_when_the_host_has_no_marker(
        bert: sb.Breakdown) -> None:
    assert bert.steps_from == "device Steps line" and bert.step_names == ["0"]
    gpu4 = next(d for d in bert.devices if d.device == "/device:GPU:4").steps[0]
    assert gpu4.period_s == pytest.approx(0.019865491)  # GPU 4's own step, its Steps event
    # the two replicas ran step 0 648 ms apart: waiting for the slowest replica
    assert bert.replica_skew_s == pytest.approx(0.647555773)


def test_op_time_from_the_device_planes_and_copies_are_their_own_part(
        bert: sb.Breakdown) -> None:
    gpu4 = next(d for d in bert.devices if d.device == "/device:GPU:4")
    step = gpu4.steps[0]
    # kernels on the compute stream: what xprof's own analysis calls device compute
    assert bert.xprof is not None and bert.xprof.hardware_type == "GPU"
    assert step.compute_s * 1e3 == pytest.approx(bert.xprof.steps[0].device_compute_ms, rel=0.01)
    # copies are neither compute nor input: their own part (the part not under a kernel)
    assert gpu4.h2d_s > 0 and 0 < step.copy_s <= gpu4.h2d_s + gpu4.d2h_s
    parts = (step.compute_s + step.communication_s + step.copy_s + step.input_s +
             step.host_s + step.idle_s)
    assert parts == pytest.approx(step.period_s)
    idle = next(d for d in bert.devices if d.device == "/device:GPU:0").steps[0]
    assert idle.idle_s == pytest.approx(idle.period_s) and idle.compute_s == 0


def test_the_trace_directory_is_left_as_it_was(bert: sb.Breakdown, tmp_path: Path) -> None:
    # xprof's converter writes a cache file beside the trace it reads: not beside a user's
    assert sorted(p.name for p in BERT.parent.iterdir()) == [BERT.name, "README.md"]


def ev(line: str, name: str, start_ms: float, end_ms: float,
       plane: str = "/host:CPU") -> Event:
    return Event(plane, line, name, start_ms * MS, end_ms * MS)


def calls(period_ms: float, *spans: tuple[str, str, float, float], n: int = 3) -> list[Event]:
    """``n`` step calls ``period_ms`` apart from 10 ms on, each with ``spans`` (line, name,
    start and end in ms from the call's start)."""
    return [ev(line, name, 10 + period_ms * i + a, 10 + period_ms * i + b)
            for i in range(n) for line, name, a, b in spans]


def test_a_custom_loop_the_python_between_calls_is_host_time_in_the_step() -> None:
    # three calls of 1 ms, 3 ms apart; an op runs 0.6 ms of each call; a 0.4 ms blocking
    # get-next inside it
    events = []
    for i in range(3):
        t = 10 + 3 * i
        events += [ev("python", "train", t, t + 1),
                   ev("tf_Compute/1", "StatefulPartitionedCall/MatMul:MatMul", t, t + 0.6),
                   ev("tf_data_iterator_get_next/2", "IteratorGetNextOp::DoCompute",
                      t + 0.6, t + 1.0),
                   ev("tf_data_private_threadpool/3", "map/Tanh:Tanh", t + 1, t + 2)]
    b = sb.breakdown_events("x", ["/host:CPU"], events)
    assert b.steps_from == "host step markers" and b.step_names == ["0", "1"]
    (row,) = b.devices
    assert row.device == "/host:CPU" and row.source == "host-threads"
    for s in row.steps:
        assert s.period_s == pytest.approx(0.003)
        assert s.compute_s == pytest.approx(0.0006)  # tf.data's own threads are not compute
        assert s.input_s == pytest.approx(0.0004)
        assert s.host_s == pytest.approx(0.002) and s.host_between_calls_s == pytest.approx(0.002)
        assert s.idle_s == pytest.approx(0)


def test_the_calls_host_time_before_its_first_op_and_after_its_last_is_told_apart() -> None:
    # calls of 2 ms, 2.5 ms apart: 0.5 ms in the call before the first op (entering the
    # function), two ops with 0.3 ms between them, 0.4 ms after the last (leaving it)
    events = calls(2.5, ("python", "train", 0, 2),
                   ("tf_Compute/1", "StatefulPartitionedCall/MatMul:MatMul", 0.5, 0.9),
                   ("tf_Compute/1", "StatefulPartitionedCall/Relu:Relu", 1.2, 1.6))
    (row,) = sb.breakdown_events("x", ["/host:CPU"], events).devices
    for s in row.steps:
        assert s.compute_s == pytest.approx(0.0008)
        assert s.host_s == pytest.approx(0.0017)  # 0.5 + 0.3 + 0.4 in the call, 0.5 after
        assert s.host_between_calls_s == pytest.approx(0.0005)
        assert s.host_call_edges_s == pytest.approx(0.0009)  # the 0.3 ms between ops: not
    mean = row.mean()
    assert mean is not None and mean.host_call_edges_s == pytest.approx(0.0009)


def test_the_steps_host_time_while_the_programs_python_ran_in_tf_data_is_told() -> None:
    # calls of 2 ms, 3 ms apart, one op of 0.5 ms; a generator's PyFunc runs 0.8 ms on a
    # tf.data thread across the end of each call (0.3 ms of it over the op)
    events = calls(3, ("python", "train", 0, 2),
                   ("tf_Compute/1", "StatefulPartitionedCall/MatMul:MatMul", 1, 1.5),
                   ("tf_data_private_threadpool/4", "PyFunc:PyFunc", 1.2, 2.0))
    (row,) = sb.breakdown_events("x", ["/host:CPU"], events).devices
    for s in row.steps:
        assert s.host_s == pytest.approx(0.0025)
        assert s.host_python_ops_s == pytest.approx(0.0005)  # 1.5-2.0: not under the op


def test_a_tf_function_named_train_inside_the_step_marker_is_the_same_step() -> None:
    # gpudiag's marker "train" around each call, and inside it TensorFlow's own trace of
    # the program's tf.function, also named "train" (the guide's `def train(num_steps)`)
    events = calls(3, ("python", "train", 0, 2.5), ("python", "train", 0.01, 2.4),
                   ("tf_Compute/1", "StatefulPartitionedCall/MatMul:MatMul", 0.5, 2), n=4)
    b = sb.breakdown_events("x", ["/host:CPU"], events)
    assert b.step_names == ["0", "1", "2"]
    (row,) = b.devices
    assert [s.period_s for s in row.steps] == pytest.approx([0.003] * 3)


def test_the_training_steps_a_call_runs_are_counted_from_its_repeated_backward_ops() -> None:
    # a loop over 5 steps inside the tf.function: its body's backward ops run 5 times a
    # call; an RNN's own loop (while_grad inside the tape) is not a training step
    events = []
    for i in range(3):
        t = 10 + 10 * i
        events.append(ev("python", "train", t, t + 8))
        for k in range(5):
            at = t + 1 + k
            events += [
                ev("tf_Compute/1", "while/body/_1/gradient_tape/dense/MatMul:MatMul",
                   at, at + 0.2),
                ev("tf_Compute/1", "gradient_tape/lstm/while_grad/body/_9/MatMul:MatMul",
                   at + 0.3, at + 0.4)]
    b = sb.breakdown_events("x", ["/host:CPU"], events)
    assert b.updates_per_call == 5
    # one step a call: each update op once
    one = [ev("python", "train", 10 * i, 10 * i + 5) for i in range(3)] + [
        ev("tf_Compute/1", "sgd/AssignSubVariableOp:AssignSubVariableOp", 10 * i + 1,
           10 * i + 1.1) for i in range(3)]
    assert sb.breakdown_events("x", ["/host:CPU"], one).updates_per_call == 1
    plain = [ev("python", "train", 10 * i, 10 * i + 5) for i in range(3)]
    assert sb.breakdown_events("x", ["/host:CPU"], plain).updates_per_call is None


def test_a_device_steps_line_step_ends_its_call_where_the_host_call_ends() -> None:
    # a one-batch profile: the GPU's step runs 0-10 ms; the host's call of the step
    # function 0-3 ms; kernels 1-4 ms (the GPU runs on after the call returned) and a last
    # small op's kernel at 9.5-10 ms: 4-9.5 ms the GPU waits with the host outside the call
    gpu = "/device:GPU:0"
    events = [ev("Steps", "0", 0, 10, plane=gpu),
              ev("python3", "EagerExecute: __inference_train_function_7", 0, 3),
              ev("Stream #1(Compute)", "volta_sgemm_128x64_nn", 1, 4, plane=gpu),
              ev("Stream #1(Compute)", "EigenMetaKernel", 9.5, 10, plane=gpu)]
    b = sb.breakdown_events("x", [gpu, "/host:CPU"], events)
    assert b.steps_from == "device Steps line"
    (step,) = b.devices[0].steps
    assert step.compute_s == pytest.approx(3.5e-3)
    assert step.host_between_calls_s == pytest.approx(5.5e-3)  # 4-9.5 ms: after the call
    assert step.launch_s == pytest.approx(1e-3)  # 0-1 ms: inside the call, no kernel yet
    # no host call in the step: the whole step is the call, as before
    b = sb.breakdown_events("x", [gpu, "/host:CPU"], [e for e in events if e.plane == gpu])
    (step,) = b.devices[0].steps
    assert step.host_between_calls_s == 0 and step.launch_s == pytest.approx(6.5e-3)


def test_two_placed_devices_communication_and_waiting_for_the_other_replica() -> None:
    events = [ev("python", "train", 0, 10), ev("python", "train", 10, 20)]
    events += [ev("tf_Compute/1", "replica_1/MatMul:MatMul", 0, 6),
               ev("tf_Compute/2", "MatMul:MatMul", 0, 3),
               ev("tf_Compute/1", "CollectiveReduceV2:CollectiveReduceV2", 6, 9),
               ev("tf_Compute/2", "CollectiveReduceV2_1:CollectiveReduceV2", 3, 9)]
    placed = {"replica_1/MatMul": "/device:CPU:2", "MatMul": "/device:CPU:1",
              "CollectiveReduceV2": "/device:CPU:2", "CollectiveReduceV2_1": "/device:CPU:1"}
    b = sb.breakdown_events("x", ["/host:CPU"], events, placed)
    one, two = b.devices
    assert (one.device, two.device) == ("/device:CPU:1", "/device:CPU:2")
    (s1,), (s2,) = one.steps, two.steps
    assert (s1.compute_s, s1.communication_s) == pytest.approx((0.003, 0.006))
    assert (s2.compute_s, s2.communication_s) == pytest.approx((0.006, 0.003))
    assert s1.host_s == pytest.approx(0.001) and s1.idle_s == pytest.approx(0)


def test_interval_sets() -> None:
    a = iv.merge([(0, 5), (3, 8), (10, 12)])
    assert a == [(0, 8), (10, 12)]
    assert iv.subtract(a, [(2, 4), (11, 20)]) == [(0, 2), (4, 8), (10, 11)]
    assert iv.intersect(a, [(7, 11)]) == [(7, 8), (10, 11)]
    assert iv.clip(a, 1, 11) == [(1, 8), (10, 11)] and iv.total_s(a) == 10 / 1e9


def test_the_trace_summary_lists_every_gpu_and_takes_op_time_from_the_device_planes() -> None:
    from gpudiag.readers import traces

    s = traces.summarize(BERT)
    busy = {d.device: d.busy_s for d in s.devices}
    assert list(busy) == [f"/device:GPU:{i}" for i in range(8)]
    assert [d for d, b in busy.items() if b == 0] == [f"/device:GPU:{i}" for i in (0, 1, 2, 3,
                                                                                  5, 7)]
    # GPU:1 ran host-to-device copies and no kernel: copies are not busy time
    assert busy["/device:GPU:4"] == pytest.approx(0.01487, rel=0.01)
    # top ops from the GPU planes' TensorFlow Ops line (the host's events are launches)
    assert s.top_ops[0].name == "Cast" and s.top_ops[0].count == 784
    assert "RemoteCall" not in [o.name for o in s.top_ops]  # a host-only event


def test_xprof_failing_on_a_trace_is_one_trace_error(tmp_path: Path) -> None:
    """xprof's child (its output in files of its own, waited for in slices) fails on a
    file that is no trace: one TraceError, nothing left beside the file."""
    from gpudiag.readers.traces import TraceError
    from gpudiag.readers.xprofview import xprof_view

    bad = tmp_path / "bad.xplane.pb"
    bad.write_bytes(b"not a trace")
    with pytest.raises(TraceError, match=r"^xprof's input-pipeline analysis failed: "):
        xprof_view(bad)
    assert [p.name for p in tmp_path.iterdir()] == ["bad.xplane.pb"]  # no cache beside it
