"""`gpudiag try`'s trial inside the program: the fixes of the configuration
(RunHookConfig.trial_fixes, gpudiag.fixes) applied at the program's own line, and the fit
stopped at a step boundary after ``stop_after_steps`` steps. Nothing is edited: the call
made at the fix's file and line gets the fix's arguments (a map's num_parallel_calls, a
compile's steps_per_execution) or its result changed (the dataset prefetched). The hooks
that record the call see it as it was made, fix included: the trial's own record shows
the change.

Called by datasets.py and kerashooks.py's wrappers, with the program's frame that made the
call; without trial fixes each call costs one attribute read."""

from __future__ import annotations

from typing import Any

from gpudiag.fixes import BY_NAME
from gpudiag.records.trial import TrialFix


def _fixes_at(method: str, frame: Any) -> list[TrialFix]:
    from gpudiag.inprogram.agent import AGENT

    fixes = AGENT.config.trial_fixes if AGENT is not None else ()
    if not fixes or frame is None:
        return []
    code = frame.f_code
    name = code.co_filename.rsplit("/", 1)[-1]
    return [f for f in fixes if f.method == method and f.line == frame.f_lineno
            and f.file == name]


def call_kwargs(method: str, frame: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the program's call of ``method`` made in ``frame``, with
    every fix at that line that changes the call's arguments applied."""
    for fix in _fixes_at(method, frame):
        module = BY_NAME.get(fix.name)
        if module is not None and module.APPLIES_TO == "arguments":
            kwargs = module.apply(kwargs, fix)
    return kwargs


def call_result(method: str, frame: Any, result: Any) -> Any:
    """What the program's call of ``method`` in ``frame`` returns, with every fix at that
    line that changes the result applied."""
    for fix in _fixes_at(method, frame):
        module = BY_NAME.get(fix.name)
        if module is not None and module.APPLIES_TO == "result":
            result = module.apply(result, fix)
    return result


def after_step(model: Any, steps_done: int) -> None:
    """A fit's step ended: with the trial's steps done (RunHookConfig.stop_after_steps),
    training stops at this step boundary (Keras reads ``stop_training`` after each batch)."""
    from gpudiag.inprogram.agent import AGENT

    limit = AGENT.config.stop_after_steps if AGENT is not None else None
    if limit is not None and steps_done >= limit:
        model.stop_training = True
