"""`gpudiag try`'s record that crosses into the program: one fix the hooks apply
(gpudiag.inprogram.config carries them, gpudiag.fixes applies them). The standard library
only: the hooks load it into the program."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrialFix:
    """One fix `gpudiag try` asks the hooks to apply in-process (gpudiag.fixes): ``name``
    (a fix module's NAME), the call it changes (``method``: map, batch, compile ...) made at
    the program's ``file`` (its base name) and ``line``, and the fix's ``value`` where it
    takes one (steps_per_execution's N)."""

    name: str
    method: str
    file: str
    line: int
    value: int | None = None
