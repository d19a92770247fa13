"""Parsing TensorFlow's placement log, on a log captured from a real run (tests/data)."""

from __future__ import annotations

from helpers import TESTS_DIR

from gpudiag.readers import placementlog
from gpudiag.readers.placementlog import op_counts_by_device, parse, split_sections

LOG = (TESTS_DIR / "data" / "placement_stderr_virtual_cpu.txt").read_text()


def test_sections_are_split_at_markers() -> None:
    sections = split_sections(LOG)
    assert {"workload", "pinned", "invalid-soft-off", "soft-on", "multitower"} <= set(sections)


def test_multitower_graph_nodes_are_attributed_to_their_function() -> None:
    rows = parse(split_sections(LOG)["multitower"])
    graph = {r.op: r for r in rows if r.kind == "graph"}
    assert graph["tower_0/MatMul"].device == "/device:CPU:1"
    assert graph["tower_1/MatMul"].device == "/device:CPU:2"
    assert graph["tower_sum"].op_type == "AddN" and graph["tower_sum"].device == "/device:CPU:0"
    assert graph["tower_0/MatMul"].function is not None
    assert graph["tower_0/MatMul"].function.startswith("__inference_multitower")


def test_eager_single_op_wrappers_are_not_counted_twice() -> None:
    rows = parse(split_sections(LOG)["pinned"])
    eager = [r for r in rows if r.kind == "eager" and r.op_type != "function"]
    # three eager matmuls, one per pinned device, each once (oneDNN names it _MklMatMul)
    assert sorted(r.device for r in eager) == ["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"]
    assert not any(r.op_type == "_Arg" for r in rows if r.kind == "eager")


def test_counts_leave_out_function_plumbing() -> None:
    counts = op_counts_by_device(parse(LOG))
    assert set(counts) == {"/device:CPU:0", "/device:CPU:1", "/device:CPU:2"}
    assert counts["/device:CPU:1"] >= 2 and counts["/device:CPU:2"] >= 2


def test_graph_block_without_an_executing_line_is_kept() -> None:
    text = ("I0 placer.cc:162] x: (_Arg): /job:localhost/replica:0/task:0/device:GPU:0\n"
            "I0 placer.cc:162] mm: (MatMul): /job:localhost/replica:0/task:0/device:GPU:0\n")
    rows = parse(text)
    assert [(r.op, r.device, r.function) for r in rows] == [
        ("x", "/device:GPU:0", None), ("mm", "/device:GPU:0", None)]
    assert op_counts_by_device(rows) == {"/device:GPU:0": 1}


def test_empty_log_gives_no_rows() -> None:
    assert parse("nothing to see\n") == []


def test_lines_of_thread_splits_a_shared_stderr_by_each_process_main_thread() -> None:
    shared = "\n".join([
        "I0000 00:00:1795333862.41 30942 placer.cc:162] a/MatMul: (MatMul): "
        "/job:worker/replica:0/task:0/device:CPU:0",
        "I0000 00:00:1795333862.42 30941 execute.cc:1775] Executing op MatMul in device "
        "/job:worker/replica:0/task:1/device:CPU:0",
        "/job:worker/replica:0/task:1",  # a continuation line: no prefix, nobody's
        "I0000 00:00:1795333862.43 31063 coordination_service.cc:502] Waiting for 1/2 tasks",
        "I0000 00:00:1795333862.44 30942 execute.cc:1775] Executing op __inference_f_9 in "
        "device /job:worker/replica:0/task:0/device:CPU:0",
    ])
    mine = placementlog.parse(placementlog.lines_of_thread(shared, 30942))
    assert [(r.kind, r.op, r.function) for r in mine] == [
        ("graph", "a/MatMul", "__inference_f_9"), ("eager", "__inference_f_9", None)]
    theirs = placementlog.parse(placementlog.lines_of_thread(shared, 30941))
    assert [(r.kind, r.op) for r in theirs] == [("eager", "MatMul")]
    assert placementlog.lines_of_thread(shared, 4242) == ""
