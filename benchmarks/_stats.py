"""The benchmarks' confidence intervals: gpudiag.verdicts.stats (one helper for the
benchmarks and `gpudiag diff`): the median's distribution-free interval, the ratio of
two medians'."""

from __future__ import annotations

from gpudiag.verdicts.stats import describe, median_ci, ratio_ci

__all__ = ["describe", "median_ci", "ratio_ci"]
