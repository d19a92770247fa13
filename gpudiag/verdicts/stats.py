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

A value against a threshold (``against``): the value's interval decides, not the value;
every threshold verdict goes through it, so that a value near its line gets one status
(a warn saying "near the threshold") instead of either side by chance.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gpudiag.layout.diff import CI_LEVEL
from gpudiag.layout.units import counted, share


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
        f"no {level} CI from {counted(len(values), 'round')}"
    return f"median {statistics.median(values):.3f} ({where})"


# ------------------------------------------------------------ a value against a threshold
# Every threshold verdict (learning, the bounds, throughput, scaling efficiency, GPU use)
# compares the measured value's interval with its threshold, never the value alone: an
# interval on one side gives that side; an interval across the line gives "near", which
# the verdict turns into one status that does not flip with noise (a warn saying "near
# the threshold: X (interval), threshold Y").

ABOVE, BELOW, NEAR = "above", "below", "near"


@dataclass(frozen=True)
class Against:
    """A measured value with its interval, against a threshold: which side, and the words."""

    value: float
    low: float
    high: float
    threshold: float
    side: str  # ABOVE (the whole interval at or above), BELOW (all of it under), NEAR
    interval_from: str = ""  # what the interval is: "95 % CI of the median of 24 steps" ...

    @property
    def near(self) -> bool:
        return self.side == NEAR

    def words(self, fmt: str | Callable[[float], str] = "{:.3g}", name: str = "") -> str:
        """``near the threshold: 19 % (14 %-25 %), threshold 20 %`` (``fmt``: a format
        string, or a function such as gpudiag.layout.units.share)."""
        show = fmt if callable(fmt) else fmt.format
        what = f"{name} " if name else ""
        span = f"{show(self.low)}-{show(self.high)}"
        where = f", {self.interval_from}" if self.interval_from else ""
        return (f"near the threshold: {what}{show(self.value)} ({span}{where}), "
                f"threshold {show(self.threshold)}")

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "low": self.low, "high": self.high,
                "threshold": self.threshold, "side": self.side,
                "interval_from": self.interval_from}


def against(value: float, interval: tuple[float, float] | None, threshold: float,
            interval_from: str = "") -> Against:
    """``value`` with its ``interval`` (None: the value alone, a point) against
    ``threshold``: ABOVE when the whole interval is at or above it, BELOW when all of it is
    under, else NEAR. The interval is widened to hold the value itself."""
    low, high = interval if interval is not None else (value, value)
    low, high = min(low, high, value), max(low, high, value)
    side = ABOVE if low >= threshold else BELOW if high < threshold else NEAR
    return Against(value, low, high, threshold, side, interval_from)


def spread(values: Sequence[float], confidence: float = 0.95
           ) -> tuple[float, tuple[float, float], str] | None:
    """The median of ``values``, its interval and what that interval is: the median's CI
    where there are values enough for one, else the values' whole range (a few values:
    the range is all they say). None for no values."""
    if not values:
        return None
    med = statistics.median(values)
    ci = median_ci(values, confidence)
    if ci is not None:
        return med, ci, f"{confidence:.0%} CI of the median of {len(values)}".replace(
            "%", " %")
    return med, (min(values), max(values)), f"the range of {len(values)}"


def proportion_ci(successes: float, n: int, confidence: float = 0.95
                  ) -> tuple[float, float] | None:
    """Wilson's interval of a proportion (accuracy over ``n`` examples); None for n < 1."""
    if n < 1:
        return None
    z = statistics.NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    p = min(1.0, max(0.0, successes / n))
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
