"""gpudiag.verdicts.stats: a measured value with its interval against a threshold."""

from __future__ import annotations

import pytest

from gpudiag.verdicts import stats


def test_a_value_is_judged_by_its_interval_not_by_which_side_it_fell_on() -> None:
    assert stats.against(0.25, (0.22, 0.30), 0.20).side == stats.ABOVE
    assert stats.against(0.15, (0.10, 0.19), 0.20).side == stats.BELOW
    # the same threshold, values either side of it with intervals across it: one answer
    a, b = stats.against(0.19, (0.14, 0.25), 0.20), stats.against(0.21, (0.16, 0.27), 0.20)
    assert a.side == b.side == stats.NEAR
    assert a.words("{:.0%}", "the input share") == \
        "near the threshold: the input share 19% (14%-25%), threshold 20%"
    # no interval: the point decides; an interval that misses its own value is widened
    assert stats.against(0.2, None, 0.2).side == stats.ABOVE
    assert stats.against(0.3, (0.1, 0.15), 0.2).side == stats.NEAR


def test_spread_is_the_medians_ci_with_values_enough_else_their_range() -> None:
    med, ci, what = stats.spread([float(v) for v in range(1, 25)]) or (0, (0, 0), "")
    assert med == 12.5 and ci == (7.0, 18.0) and what == "95 % CI of the median of 24"
    few = stats.spread([3.0, 1.0, 2.0])
    assert few == (2.0, (1.0, 3.0), "the range of 3")
    assert stats.spread([]) is None


def test_proportion_ci_is_wilsons() -> None:
    low, high = stats.proportion_ci(245, 2048) or (0, 0)
    assert low == pytest.approx(0.1060, abs=5e-4) and high == pytest.approx(0.1342, abs=5e-4)
    assert stats.proportion_ci(0, 0) is None
    assert stats.proportion_ci(0, 10) is not None
