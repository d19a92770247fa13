"""The tf.data fixes read from the program's own calls: never "add X" where X is there;
without the calls (a trace alone), from the stage the trace's iterators waited in."""

from __future__ import annotations

from typing import Any

from gpudiag.layout.events import DatasetCall
from gpudiag.readers.xprofview import InputOp
from gpudiag.verdicts.pipeline import pipeline_fixes, stage_fixes


def call(method: str, inp: int | None, out: int, line: int, **args: Any) -> DatasetCall:
    return DatasetCall(method, args, None, inp, out,
                       {"file": "/w/ib.py", "line": line, "code": f"{method}(...)",
                        "direct": True})


def test_a_pipeline_ending_in_prefetch_after_repeat_is_not_told_to_add_one() -> None:
    """`ds.map(heavy, num_parallel_calls=AUTOTUNE).batch(64).repeat().prefetch(AUTOTUNE)`,
    every call recorded: nothing to add."""
    calls = [call("from_tensor_slices", None, 1, 8),
             call("map", 1, 2, 10, num_parallel_calls="AUTOTUNE"),
             call("batch", 2, 3, 10, batch_size=64), call("repeat", 3, 4, 10),
             call("prefetch", 4, 5, 10, buffer_size="AUTOTUNE")]
    assert pipeline_fixes(calls) == []


def test_a_prefetch_behind_an_unrecorded_call_is_not_taken_for_a_missing_one() -> None:
    """The same pipeline from an older event file, where repeat was not recorded: the
    prefetch's input is no recorded dataset, so the batch is not called the pipeline's end."""
    calls = [call("from_tensor_slices", None, 1, 8),
             call("map", 1, 2, 10, num_parallel_calls="AUTOTUNE"),
             call("batch", 2, 3, 10, batch_size=64),
             call("prefetch", 4, 5, 10, buffer_size="AUTOTUNE")]
    assert pipeline_fixes(calls) == []


def test_a_pipeline_without_prefetch_is_told_at_its_last_line() -> None:
    calls = [call("from_tensor_slices", None, 1, 8),
             call("map", 1, 2, 9, num_parallel_calls="AUTOTUNE"),
             call("batch", 2, 3, 11, batch_size=64), call("repeat", 3, 4, 12)]
    fixes = pipeline_fixes(calls)
    assert len(fixes) == 1 and fixes[0].startswith("the pipeline ending at ib.py:12")
    assert "has no prefetch" in fixes[0]


def test_a_serial_map_is_told_with_its_line() -> None:
    calls = [call("from_tensor_slices", None, 1, 8), call("map", 1, 2, 9),
             call("prefetch", 2, 3, 10, buffer_size="AUTOTUNE")]
    fixes = pipeline_fixes(calls)
    assert fixes == [fixes[0]] and "ib.py:9" in fixes[0] and "num_parallel_calls" in fixes[0]


def test_the_stage_a_trace_waited_in_gives_its_fix_and_only_it() -> None:
    """xprof's iterators, the one with most time of its own first (names as TF 2.4-2.16
    write them): an empty prefetch buffer (a map after the prefetch costs nothing of its
    own here and is not blamed), a Python generator, a serial map; a parallel map that
    waited is no serial map, and nothing is said with no iterator listed."""
    def ops(*names: str) -> list[InputOp]:
        return [InputOp(n, 100.0 - i, 1.0 - i / 10) for i, n in enumerate(names)]
    (empty,) = stage_fixes(ops("Iterator::Model::MaxIntraOpParallelism::Map::Prefetch",
                               "Iterator::Model::MaxIntraOpParallelism"))
    assert empty.startswith("the prefetch's buffer was empty") and "AUTOTUNE" in empty
    assert "serial" not in empty and "a map that runs" not in empty
    (gen,) = stage_fixes(ops("Iterator::Model::Prefetch::FlatMap[0]::Generator"))
    assert "from_generator" in gen and "GIL" in gen
    (serial,) = stage_fixes(ops("Iterator::Root::Map", "Iterator::Root"))
    assert serial.endswith("pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map")
    assert stage_fixes(ops("Iterator::Root::ParallelMapV2", "Iterator::Root")) == []
    assert stage_fixes(ops("Iterator::Model")) == [] and stage_fixes([]) == []


def test_a_serial_python_map_is_told_to_vectorise_and_where_it_waits_to_map_in_parallel() -> None:
    """`ds.map(load)` whose function reads each example through tf.numpy_function: its
    Python computing is serialised by the GIL (vectorise it), but a wait (a file read)
    releases the GIL, so num_parallel_calls overlaps the waits (docs/accuracy.md measured
    such a map 0.6x the step); a map already in parallel is told only to vectorise."""
    from gpudiag.fixes import parallel_map
    from gpudiag.verdicts.pipeline import fixes

    def python_map(**args: Any) -> DatasetCall:
        return DatasetCall("map", args, {"name": "load", "python_ops": ["PyFunc"]}, 1, 2,
                           {"file": "/w/ib.py", "line": 10, "code": "map(load)",
                            "direct": True})

    tail = [call("batch", 2, 3, 10, batch_size=16), call("prefetch", 3, 4, 10)]
    serial = fixes([call("from_tensor_slices", None, 1, 8),
                    python_map(num_parallel_calls=None), *tail])
    assert [(f.kind, f.where) for f in serial] == [("python", "ib.py:10"),
                                                   ("parallel", "ib.py:10")]
    assert serial[1].what == parallel_map.FIX.advice  # what `gpudiag try` applies and measures
    assert "waits rather than computes" in serial[1].text
    parallel = fixes([call("from_tensor_slices", None, 1, 8),
                      python_map(num_parallel_calls="AUTOTUNE"), *tail])
    assert [f.kind for f in parallel] == ["python"]
