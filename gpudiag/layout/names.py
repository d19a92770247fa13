"""Names with one index or key in them (part of gpudiag.layout)."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Indexed:
    """A name with one slot, e.g. ``gpu{}/util_percent``: call it with the index (or key)
    for the name; ``pattern`` is the regular expression of every integer index (what a
    Custom Scalars chart needs to put every GPU or replica on one chart)."""

    template: str

    def __call__(self, index: int | str) -> str:
        return self.template.format(index)

    @property
    def pattern(self) -> str:
        head, tail = self.template.split("{}")
        return f"^{re.escape(head)}\\d+{re.escape(tail)}$"
