"""`gpudiag try`'s trial inside the program: the fixes of the configuration
(RunHookConfig.trial_fixes, gpudiag.fixes) applied at the program's own line, and the fit
stopped at a step boundary after ``stop_after_steps`` steps (a custom loop: the process
ended cleanly after that many calls of its step tf.function, ``stop_function``). Nothing is
edited: the call made at the fix's file and line gets the fix's arguments (a map's
num_parallel_calls, a compile's steps_per_execution) or its result changed (the dataset
prefetched); a tf.function whose Python function starts at the fix's line (its first
decorator's) is made with the fix's arguments (reduce_retracing). The hooks that record the
call see it as it was made, fix included: the trial's own record shows the change.

Called by datasets.py and kerashooks.py's wrappers, with the program's frame that made the
call, and by tracing.py's tf.function constructor with the function's code; without trial
fixes each call costs one attribute read."""

from __future__ import annotations

from typing import Any

from gpudiag.fixes import BY_NAME
from gpudiag.records.trial import TrialFix


def _fixes_at(method: str, frame: Any) -> list[TrialFix]:
    if frame is None:
        return []
    return _fixes_of(method, frame.f_code.co_filename, frame.f_lineno)


def _fixes_of(method: str, filename: str, line: int) -> list[TrialFix]:
    from gpudiag.inprogram.agent import AGENT

    fixes = AGENT.config.trial_fixes if AGENT is not None else ()
    if not fixes:
        return []
    name = filename.rsplit("/", 1)[-1]
    return [f for f in fixes if f.method == method and f.line == line and f.file == name]


def call_kwargs(method: str, frame: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of the program's call of ``method`` made in ``frame``, with
    every fix at that line that changes the call's arguments applied."""
    return _changed(_fixes_at(method, frame), kwargs)


def function_kwargs(code: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments a tf.function of the Python function of ``code`` is made
    with, every fix at the function's first line applied (reduce_retracing)."""
    if code is None:
        return kwargs
    return _changed(_fixes_of("function", code.co_filename, code.co_firstlineno), kwargs)


def _changed(fixes: list[TrialFix], kwargs: dict[str, Any]) -> dict[str, Any]:
    for fix in fixes:
        module = BY_NAME.get(fix.name)
        if module is not None and module.FIX.applies_to == "arguments":
            kwargs = module.apply(kwargs, fix)
    return kwargs


def call_result(method: str, frame: Any, result: Any) -> Any:
    """What the program's call of ``method`` in ``frame`` returns, with every fix at that
    line that changes the result applied."""
    for fix in _fixes_at(method, frame):
        module = BY_NAME.get(fix.name)
        if module is not None and module.FIX.applies_to == "result":
            result = module.apply(result, fix)
    return result


def ends_after(function: str, calls: int) -> bool:
    """Whether the custom loop's step tf.function ``function`` has made the trial's calls
    (RunHookConfig.stop_function, stop_after_steps): its caller then ends the process."""
    from gpudiag.inprogram.agent import AGENT

    config = AGENT.config if AGENT is not None else None
    return (config is not None and config.stop_function == function
            and config.stop_after_steps is not None and calls >= config.stop_after_steps)


def after_step(model: Any, steps_done: int) -> None:
    """A fit's step ended: with the trial's steps done (RunHookConfig.stop_after_steps),
    training stops at this step boundary (Keras reads ``stop_training`` after each batch)."""
    from gpudiag.inprogram.agent import AGENT

    limit = AGENT.config.stop_after_steps if AGENT is not None else None
    if limit is not None and steps_done >= limit:
        model.stop_training = True
        stopped()


#: Whether this trial stopped the program's training before its end (its fit at a step
#: boundary, its custom loop after its step function's calls): see ``end_after_exit``.
STOPPED: list[bool] = []


def stopped() -> None:
    """The trial stopped the program's training before its end."""
    if not STOPPED:
        STOPPED.append(True)


def end_after_exit(crashed: bool) -> None:
    """After the hooks' exit callbacks (the record written): a trial that stopped the
    training before its end leaves the process here, its output flushed, with exit code 0
    (1 where an uncaught exception was recorded), before the interpreter's finalization.
    A tf.data pipeline left mid-epoch with a map running Python (tf.py_function) deadlocks
    there (its threads wait for the GIL the finalizing thread holds: the process never
    ends, in plain TensorFlow too), and a fit stopped by ``--steps`` is usually mid-epoch.
    Nothing runs after the hooks' exit handler (registered first, it runs last) but the
    finalization skipped. Without a stop: nothing (the program ends as it would)."""
    if not STOPPED:
        return
    import contextlib
    import os
    import sys

    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    os._exit(1 if crashed else 0)
