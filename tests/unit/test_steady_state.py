"""One steady-state rule (gpudiag.verdicts.run.throughput.steady): run.throughput and
`gpudiag diff` give the same median step for the same run, a custom loop's as a Keras
fit's (the step time in TensorBoard is the period between step starts for every loop)."""

from __future__ import annotations

import pytest

from gpudiag.verdicts.run.throughput import steady


@pytest.mark.parametrize(("first", "last", "expected"), [
    (9, 10, False), (10, 11, True), (18, 19, True), (19, 20, False), (20, 21, False),
    (21, 22, False), (22, 23, False), (23, 24, True), (14, 18, True), (16, 20, False)])
def test_a_period_counts_past_the_warmup_and_one_step_from_a_profiled_one(
        first: int, last: int, expected: bool) -> None:
    assert steady(first, last, 10, (20, 21)) is expected
