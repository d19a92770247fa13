"""The tf.data fixes read from the program's own calls: never "add X" where X is there."""

from __future__ import annotations

from typing import Any

from gpudiag.records.run import DatasetCall
from gpudiag.verdicts.pipeline import pipeline_fixes


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
