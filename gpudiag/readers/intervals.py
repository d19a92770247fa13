"""Sets of time intervals (start_ns, end_ns) as sorted, disjoint lists: union, clip,
subtract and total length. Plain data, no TensorFlow; what the trace readers add up."""

from __future__ import annotations

from collections.abc import Iterable

Span = tuple[float, float]


def merge(spans: Iterable[Span]) -> list[Span]:
    """The union of ``spans`` as sorted, disjoint intervals."""
    out: list[Span] = []
    for start, end in sorted(s for s in spans if s[1] > s[0]):
        if out and start <= out[-1][1]:
            if end > out[-1][1]:
                out[-1] = (out[-1][0], end)
        else:
            out.append((start, end))
    return out


def clip(merged: list[Span], start: float, end: float) -> list[Span]:
    """The part of a merged set inside [start, end)."""
    return [(max(a, start), min(b, end)) for a, b in merged if b > start and a < end]


def subtract(merged: list[Span], minus: list[Span]) -> list[Span]:
    """``merged`` less ``minus`` (both merged)."""
    out: list[Span] = []
    j = 0
    for a, b in merged:
        cur = a
        while j < len(minus) and minus[j][1] <= cur:
            j += 1
        k = j
        while k < len(minus) and minus[k][0] < b:
            if minus[k][0] > cur:
                out.append((cur, minus[k][0]))
            cur = max(cur, minus[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def total_s(merged: list[Span]) -> float:
    """Total length of a merged set, in seconds."""
    return sum(b - a for a, b in merged) / 1e9


def intersect(merged: list[Span], other: list[Span]) -> list[Span]:
    """The part of ``merged`` inside ``other`` (both merged)."""
    return subtract(merged, subtract(merged, other))
