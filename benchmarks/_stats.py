"""How sure a benchmark's median is: a distribution-free confidence interval.

For n values, the interval between the k-th smallest and the k-th largest holds the
true median with probability 1 - 2 P(Binomial(n, 1/2) < k); the widest k for which that is
at least the confidence asked is used (no assumption on the shape of the values: the
rounds of a shared machine are not normal). With few values the interval is the whole
range, or more: then it is None and the median shows nothing by itself.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence


def median_ci(values: Sequence[float], confidence: float = 0.95
              ) -> tuple[float, float] | None:
    """The interval around the median of ``values`` at ``confidence``, or None when there
    are too few values for one."""
    n = len(values)
    ordered = sorted(values)
    below = 0.0  # P(Binomial(n, 1/2) < k), for k = 1, 2 ...
    best = None
    for k in range(1, n // 2 + 1):
        below += math.comb(n, k - 1) / 2**n
        if 1 - 2 * below < confidence:
            break
        best = k
    return None if best is None else (ordered[best - 1], ordered[n - best])


def describe(values: Sequence[float], confidence: float = 0.95) -> str:
    """``median 1.008 (95 % CI 1.002-1.013)``, or the median with ``no CI from n rounds``."""
    ci = median_ci(values, confidence)
    where = f"{confidence:.0%} CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else \
        f"no {confidence:.0%} CI from {len(values)} rounds"
    return f"median {statistics.median(values):.3f} ({where.replace('%', ' %')})"
