"""What the host-side causes share (gpudiag.verdicts.run.hostcauses, retracing, callbacks,
hostsync): a recorded frame written as ``file:line``, a prediction of the step without a
cause, the causes' actions with their predictions. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpudiag.records.run import StepSeries
from gpudiag.report import Action
from gpudiag.verdicts.step_causes import Cause
from gpudiag.verdicts.whatif import as_prediction


def where(at: dict[str, Any] | None) -> str:
    if not at or not at.get("file"):
        return "?"
    return f"{str(at['file']).rsplit('/', 1)[-1]}:{at.get('line')}"


def code(at: dict[str, Any] | None) -> str:
    return f" (`{at['code']}`)" if at and at.get("code") else ""


def line(at: dict[str, Any] | None) -> str | None:
    """``file:line`` of a recorded frame (None: not known)."""
    text = where(at)
    return None if text == "?" else text


def predicted(cause: str, fix: str, period: float | None, step: float | None, model: str,
              inputs: dict[str, Any]) -> dict[str, Any]:
    if not period or step is None or step <= 0:
        return {"cause": cause, "step_s": None, "why": "the call's time without it was not "
                "measured"}
    return {"cause": cause, "fix": fix, "step_s": step, "speedup": period / step,
            "model": model, "inputs": {"period_s": period, **inputs}}


def cause_actions(causes: Sequence[Cause]) -> tuple[Action, ...]:
    """Each cause's actions, its own prediction on its first."""
    out: list[Action] = []
    for c in causes:
        mine = [a for a in c.actions if a not in out]
        if mine:
            mine[0] = replace(mine[0], predicted=as_prediction(c.evidence.get("predicted")))
        out += mine
    return tuple(out)


def fit_wall_s(s: StepSeries) -> float | None:
    """The fit's wall time, its first step's start to its last step's end."""
    starts = [(st.start_unix_s, st.duration_s) for st in s.steps if st.start_unix_s is not None]
    if not starts or starts[-1][1] is None:
        return None
    return starts[-1][0] + starts[-1][1] - starts[0][0]
