"""How gpudiag writes durations and shares, declared once: the terminal, report.md, the
verdicts' titles and the GPUDIAG page (tbplugin's JavaScript follows the same rule).

The rule: a duration is written in milliseconds with at least three significant digits
and no more decimals than that needs (``0.0326`` s -> ``32.6 ms``, ``0.12345`` s ->
``123 ms``, ``1.5`` s -> ``1500 ms``, ``0.00035`` s -> ``0.350 ms``); a share is a whole
percent with a space before the sign (``0.47`` -> ``47 %``); a ratio two decimals and
``x`` (``2.66x``); a count agrees with its noun (``1 warning``, ``2 warnings``). Pure and
a leaf: imports nothing of gpudiag's.
"""

from __future__ import annotations

import math

#: The level of every interval gpudiag gives (a median's, a ratio's), declared once; the
#: diff record keeps it beside its intervals (gpudiag.layout.diff).
CI_LEVEL = 0.95
MS_SIGNIFICANT = 3  # digits a duration in ms keeps at least
MS_MAX_DECIMALS = 3  # a duration under 0.01 ms is written 0.00x ms, never more decimals


def ms_decimals(milliseconds: float) -> int:
    """The decimals the rule gives ``milliseconds``: 2 from 1 ms, 1 from 10 ms, 0 from
    100 ms; 3 under 1 ms."""
    if not math.isfinite(milliseconds) or milliseconds == 0:
        return 0
    magnitude = math.floor(math.log10(abs(milliseconds)))
    return max(0, min(MS_MAX_DECIMALS, MS_SIGNIFICANT - 1 - magnitude))


def ms_number(seconds: float) -> str:
    """``seconds`` in ms by the rule, without the unit (``0.0326`` -> ``32.6``)."""
    value = seconds * 1e3
    if not math.isfinite(value):
        return str(value)
    text = f"{value:.{ms_decimals(value)}f}"
    # rounding can carry into the next magnitude (9.996 -> "10.00"): write it by its rule
    return f"{float(text):.{ms_decimals(float(text))}f}" if float(text) != 0 else text


def duration(seconds: float | None) -> str:
    """``seconds`` in ms by the rule (``32.6 ms``); ``n/a`` for None."""
    return "n/a" if seconds is None else f"{ms_number(seconds)} ms"


def share(fraction: float | None) -> str:
    """A share of a whole as a whole percent (``47 %``); ``n/a`` for None."""
    return "n/a" if fraction is None else f"{fraction * 100:.0f} %"


def ratio(x: float | None) -> str:
    """A ratio of two durations (``2.66x``); ``n/a`` for None."""
    return "n/a" if x is None else f"{x:.2f}x"


#: The nouns gpudiag counts whose plural is not the noun and "s".
_PLURALS = {"batch": "batches", "process": "processes"}


def counted(n: object, word: str, plural: str | None = None) -> str:
    """A count and its noun, read as English: ``1 warning``, ``2 warnings``, ``0 steps``,
    ``3 batches`` (``plural``: where adding "s" is not it and _PLURALS does not say).
    ``n`` as recorded: a count not known ("?", None) is written as it is, plural."""
    if n == 1:
        return f"{n} {word}"
    return f"{n} {plural or _PLURALS.get(word, word + 's')}"
