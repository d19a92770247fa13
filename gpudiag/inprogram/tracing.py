"""Retracing: what a step tf.function's traces cost and what made each one.

TensorFlow traces a tf.function again (builds a new graph) when a call's arguments do not
match a trace it has: a Python scalar with a new value, a tensor of a new shape or dtype,
another Python object; a new tf.function object made of the same Python function has no
trace at all. gpudiag.inprogram.functions reads the function's own tracing count
(``experimental_get_tracing_count()``: the length of its cache, ~0.1 us) before and after
each call; this module adds what costs something only when a trace happens:

- the seconds spent building graphs: TensorFlow's ``_create_concrete_function`` (called
  once per trace, never on a call that finds its trace) is wrapped to add its time to a
  clock (the outermost trace only: a tf.function traced inside another is in its time);
- the call's arguments described (a tensor by dtype and shape, a Python scalar by value,
  another object by type and identity), set against the trace before, so the argument
  that changed is named;
- the program's line that made each tf.function object (``Function.__init__`` for a
  Python function of the program's own code: a stack walk per object made, none per call).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Callable
from typing import Any

from gpudiag.inprogram import trial
from gpudiag.inprogram.agent import caller_frame, patch, unwrapped, wrap_once
from gpudiag.inprogram.usercode import is_user_file, own_frame

CREATED_ATTR = "_gpudiag_created_at"
MAX_ARGS = 12  # arguments described per trace
_STATE = threading.local()


class TraceClock:
    """Seconds spent tracing in this process (the outermost traces, every thread)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, create: Callable[..., Any]) -> Callable[..., Any]:
        clock = self

        def _create_concrete_function(*args: Any, **kwargs: Any) -> Any:
            depth = getattr(_STATE, "depth", 0)
            _STATE.depth = depth + 1
            t0 = time.perf_counter()
            try:  # the program's exceptions (its step's code, traced): patch()'s gate
                return create(*args, **kwargs)  # drops gpudiag's frames from them
            finally:
                _STATE.depth = depth
                if depth == 0:
                    clock.seconds += time.perf_counter() - t0

        return _create_concrete_function


CLOCK = TraceClock()


def install_clock() -> None:
    from tensorflow.python.eager.polymorphic_function import tracing_compilation as tc

    wrap_once(tc, "_create_concrete_function", CLOCK.wrap)


def user_line(start: Any) -> dict[str, Any] | None:
    """The innermost frame of the program's code from ``start`` outwards, with its line."""
    import linecache

    frame = own_frame(start, 30)
    if frame is None:
        return None
    code = frame.f_code
    return {"file": code.co_filename, "line": frame.f_lineno, "function": code.co_name,
            "code": linecache.getline(code.co_filename, frame.f_lineno).strip()}


def install_created_at(cls: Any, code_of: Callable[[Any], Any]) -> None:
    """Record, on each tf.function object made of the program's own Python function, the
    program's line that made it."""

    original = unwrapped(cls, "__init__")
    if original is None:
        return

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        try:  # `gpudiag try`: a fix at the function's line (reduce_retracing)
            fn = kwargs.get("python_function", args[0] if args else None)
            kwargs = trial.function_kwargs(code_of(fn), kwargs)
        except Exception:  # never into the program: made as the program asked
            pass
        original(self, *args, **kwargs)
        try:
            code = code_of(self._python_function)
            if code is not None and is_user_file(code.co_filename):
                self.__dict__[CREATED_ATTR] = user_line(caller_frame(1))
        except Exception:  # never into the program; a missing line is said
            pass

    patch(cls, "__init__", __init__, wraps=original)


def _describe(value: Any) -> dict[str, Any]:
    if isinstance(value, bool | int | float | str) or value is None:
        return {"kind": "python", "value": repr(value)[:60]}
    shape, dtype = getattr(value, "shape", None), getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        try:
            dims = [None if d is None else int(d) for d in shape.as_list()] \
                if hasattr(shape, "as_list") else [int(d) for d in shape]
        except Exception:
            dims = None
        return {"kind": "tensor", "shape": dims, "dtype": str(getattr(dtype, "name", dtype))}
    if isinstance(value, list | tuple):
        return {"kind": "type", "value": f"{type(value).__name__} of {len(value)}"}
    return {"kind": "object", "value": f"{type(value).__name__} #{id(value):x}"}


def describe_args(python_function: Any, args: tuple[Any, ...], kwds: dict[str, Any]
                  ) -> dict[str, dict[str, Any]]:
    """The call's arguments by name, each described as TensorFlow keys a trace on it."""
    try:
        names = list(inspect.signature(python_function).parameters)
    except (TypeError, ValueError):
        names = []
    out: dict[str, dict[str, Any]] = {}
    for n, value in enumerate(args[:MAX_ARGS]):
        out[names[n] if n < len(names) else f"arg{n}"] = _describe(value)
    for name, value in list(kwds.items())[:MAX_ARGS]:
        out[str(name)] = _describe(value)
    return out


def _text(d: dict[str, Any] | None) -> str:
    if d is None:
        return "absent"
    if d["kind"] == "tensor":
        return f"{d['dtype']}{d['shape']}"
    return str(d.get("value"))


def changed(was: dict[str, dict[str, Any]], now: dict[str, dict[str, Any]]
            ) -> list[dict[str, Any]]:
    """What differs between two traces' arguments: {arg, was, now, kind}."""
    out = []
    for name in dict.fromkeys([*was, *now]):
        a, b = was.get(name), now.get(name)
        if a == b:
            continue
        if a is not None and b is not None and a["kind"] == b["kind"] == "tensor":
            kind = "dtype" if a["dtype"] != b["dtype"] else "shape"
        elif a is not None and b is not None and a["kind"] == b["kind"]:
            kind = a["kind"]
        else:
            kind = "type"
        out.append({"arg": name, "was": _text(a), "now": _text(b), "kind": kind})
    return out
