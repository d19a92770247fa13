"""`gpudiag try`'s record that crosses into the program: one fix the hooks apply
(gpudiag.inprogram.config carries them, gpudiag.fixes applies them). The standard library
only: the hooks load it into the program."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrialFix:
    """One fix `gpudiag try` asks the hooks to apply in-process (gpudiag.fixes): ``name``
    (a fix module's FIX.name), the call it changes (``method``: map, batch, compile ...) made at
    the program's ``file`` (its base name) and ``line``, and the fix's ``value`` where it
    takes one (steps_per_execution's N)."""

    name: str
    method: str
    file: str
    line: int
    value: int | None = None


@dataclass(frozen=True)
class Fix:
    """What one fix module of gpudiag.fixes is (its ``FIX``): ``name`` (``--fix``'s word,
    a TrialFix's name), ``label`` (the fix in a few words), what it ``changes`` at the
    line, the ``advice`` it answers (words of a bottleneck action's ``what``; None: offered
    by the module's ``offer(wheres, calls)``), whether it ``can_change_results`` (its
    trials' loss at matching steps is compared), what it ``applies_to`` in the program
    ("arguments": the call's keyword arguments; "result": what the call returns), the
    what-if ``prediction`` that sizes it alone (a key of the prediction's ``by_change``;
    None: the advised action's own prediction is this fix's, where ``predicted``)."""

    name: str
    label: str
    changes: str
    advice: str | None
    can_change_results: bool = False
    applies_to: str = "arguments"
    prediction: str | None = None
    predicted: bool = True
