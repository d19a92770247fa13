"""A fix's prediction as gpudiag.verdicts.whatif's models make it: its record (the step
the fix should give, with the model and its inputs, or why there is no number), its
interval (the model replayed on each profiled step, widened to its stated assumption's
other end), and the machine it is made on (its cores and load).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

Parts = Mapping[str, float]  # period_s, compute_s, input_s, communication_s, host_s, ...


def no_number(cause: str, why: str) -> dict[str, Any]:
    return {"cause": cause, "step_s": None, "why": why}


def a_number(cause: str, fix: str, period: float, step: float, model: str,
         inputs: dict[str, Any]) -> dict[str, Any]:
    return {"cause": cause, "fix": fix, "step_s": step,
            "speedup": period / step if step > 0 else None, "model": model,
            "inputs": {"period_s": period, **inputs}}


# each model's stated assumption, whose other end bounds its interval (with_interval)
ASSUMED = {
    "communication-bound": "its assumption's other end (no op's time growing with the "
                           "batch)",
    "overhead-bound": "its assumption's other end (the gaps between ops paid once a call "
                      "too)",
    "input-bound": "its assumption's other end (a parallel map whose work does not scale "
                   "over the cores, a pipeline already overlapped by TensorFlow's injected "
                   "prefetch)",
    "input-bound low": "its assumption's other end (the consumer's ops given the cores "
                       "the producer's thread held)",
}


def with_interval(predicted: dict[str, Any], per_step: Sequence[Mapping[str, Any]]
                  ) -> dict[str, Any]:
    """``predicted`` (for the mean step) with its interval: ``step_s_low`` and
    ``step_s_high`` from the same model replayed on each profiled step that was measured
    (``per_step``: each step's own prediction; the 95 % interval of their median from 6
    steps on, else their range), widened to the other end of the model's stated
    assumption where it has one (ASSUMED: ``assumed_low_s`` / ``assumed_high_s``). No
    interval where there is no number."""
    from gpudiag.verdicts.stats import spread

    step = predicted.get("step_s")
    if step is None:
        return predicted
    steps = [float(x["step_s"]) for x in per_step if x.get("step_s") is not None]
    level = spread(steps)
    low, high = (level[1] if level else (step, step))
    low, high = min(low, step), max(high, step)
    froms = [f"the model replayed on {level[2]} profiled steps"] if level else \
        ["no per-step replay (the mean step only)"]
    assumed = predicted.get("assumed_low_s")
    if assumed is not None and assumed < low:
        low = assumed
        cause = str(predicted.get("cause"))
        froms.append(predicted.get("assumed_low_from") or ASSUMED.get(
            f"{cause} low", ASSUMED.get(cause, "its assumption's other end")))
    assumed = predicted.get("assumed_high_s")
    if assumed is not None and assumed > high:
        high = assumed
        froms.append(ASSUMED.get(str(predicted.get("cause")), "its assumption's other end"))
    return {**predicted, "step_s_low": low, "step_s_high": high,
            "interval_from": "; ".join(froms)}


def available_cores() -> int:
    """The cores this process may run on (a parallel map's parallelism at most)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def machine_load() -> float | None:
    """This machine's 1-minute load average (None where the system has none)."""
    try:
        return os.getloadavg()[0]
    except (AttributeError, OSError):
        return None
