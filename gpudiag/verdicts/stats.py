"""How sure a median is: a distribution-free confidence interval, and one for the ratio
of two medians (what `gpudiag diff` and the benchmarks print).

For n values, the interval between the k-th smallest and the k-th largest holds the
true median with probability 1 - 2 P(Binomial(n, 1/2) < k); the widest k for which that is
at least the confidence asked is used (no assumption on the shape of the values: step
times of a shared machine are not normal). With few values the interval is the whole
range, or more: then it is None and the median shows nothing by itself.

The ratio B/A of two independent medians: each median's interval at confidence
1 - (1 - c) / 2, so that both hold together with probability at least c (Bonferroni),
and the ratio's interval is [low B / high A, high B / low A]: conservative, never narrower
than the truth.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

from gpudiag.layout.diff import CI_LEVEL
from gpudiag.layout.units import share


def median_ci(values: Sequence[float], confidence: float = CI_LEVEL
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


def ratio_ci(a: Sequence[float], b: Sequence[float], confidence: float = CI_LEVEL
             ) -> tuple[float, float] | None:
    """The interval of median(b) / median(a) at ``confidence`` (module docstring), or None
    when either side has too few values."""
    each = 1 - (1 - confidence) / 2
    ca, cb = median_ci(a, each), median_ci(b, each)
    if ca is None or cb is None or ca[0] <= 0 or ca[1] <= 0:
        return None
    return cb[0] / ca[1], cb[1] / ca[0]


def describe(values: Sequence[float], confidence: float = CI_LEVEL) -> str:
    """``median 1.008 (95 % CI 1.002-1.013)``, or the median with ``no CI from n rounds``."""
    ci = median_ci(values, confidence)
    level = share(confidence)
    where = f"{level} CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else \
        f"no {level} CI from {len(values)} rounds"
    return f"median {statistics.median(values):.3f} ({where})"
