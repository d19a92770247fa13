"""Keras's configuration calls (installed by gpudiag.inprogram.kerashooks with its fit
hook): ``Model.compile``'s line and the arguments that change a step (steps_per_execution,
jit_compile, run_eagerly), and the dtype policy the program sets (mixed precision), each
with the program's line. Imports nothing heavy: Keras is the module the program imported.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import trial
from gpudiag.inprogram.agent import caller_frame, patch, unwrapped
from gpudiag.layout import events, loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

def install_compile(agent: Agent, model_cls: Any) -> None:
    """``Model.compile``: where the program calls it and its steps_per_execution,
    jit_compile and run_eagerly (the fixes that go on that line are checked against
    them)."""
    import inspect

    from gpudiag.inprogram.tracing import user_line

    original = unwrapped(model_cls, "compile")
    if original is None:
        return
    try:
        signature: inspect.Signature | None = inspect.signature(original)
    except (TypeError, ValueError):
        signature = None

    def record(model: Any, args: tuple[Any, ...], kwargs: dict[str, Any], frame: Any) -> None:
        where = user_line(frame)
        if where is None or signature is None:
            return
        bound = signature.bind_partial(model, *args, **kwargs)
        bound.apply_defaults()
        given = bound.arguments
        steps = given.get("steps_per_execution")
        agent.emit(loopevents.Compile(
            model=type(model).__name__, model_id=id(model),
            steps_per_execution=steps if isinstance(steps, int) else None,
            jit_compile=repr(given.get("jit_compile")),
            run_eagerly=given.get("run_eagerly") if isinstance(given.get("run_eagerly"), bool)
            else None, caller=where))

    @functools.wraps(original)
    def compile(self: Any, *args: Any, **kwargs: Any) -> Any:

        try:
            kwargs = trial.call_kwargs("compile", caller_frame(1), kwargs)
        except Exception as exc:
            agent.hook_error("applying a trial fix to Model.compile", exc)
        try:
            record(self, args, kwargs, caller_frame(1))
        except Exception as exc:
            agent.hook_error("Model.compile", exc)
        return original(self, *args, **kwargs)

    patch(model_cls, "compile", compile, wraps=original)


POLICY_SETTERS = (("mixed_precision", "set_global_policy"), ("config", "set_dtype_policy"))


def install_policy(agent: Agent, keras: ModuleType) -> None:
    """``keras.mixed_precision.set_global_policy`` (and Keras 3's
    ``keras.config.set_dtype_policy``): recorded as a configuration call with the policy's
    name and the program's line (run.precision names where to change it)."""
    for module_name, name in POLICY_SETTERS:
        module = getattr(keras, module_name, None)
        original = unwrapped(module, name, missing_ok=True)
        if original is not None:
            patch(module, name, _policy_setter(agent, f"{keras.__name__}.{module_name}."
                                               f"{name}", original))


def _policy_setter(agent: Agent, api: str, original: Callable[..., Any]
                   ) -> Callable[..., Any]:
    from gpudiag.inprogram.tfhooks import caller

    @functools.wraps(original)
    def setter(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)  # the program's call: its errors
        try:
            policy = args[0] if args else next(iter(kwargs.values()), None)
            name = policy if isinstance(policy, str) else \
                getattr(policy, "name", repr(policy)[:80])
            agent.emit(events.ConfigCall(api=api, order=0, args=[name], kwargs={},
                                         initialized_before=None, caller=caller(),
                                         error_type=None, error=None))
        except Exception as exc:
            agent.hook_error(f"recording {api}", exc)
        return result

    setter.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
    return setter
