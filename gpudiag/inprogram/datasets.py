"""The tf.data pipelines the program builds: one ``dataset_call`` event per call.

``tf.data.Dataset``'s ``map``, ``prefetch``, ``cache``, ``interleave``, ``batch``,
``padded_batch``, ``shuffle``, the calls a pipeline passes through on its way to its end
(``repeat``, ``take``, ``skip``, ``filter`` ...) and its sources ``from_tensor_slices``,
``from_tensors``, ``from_generator``, and ``tf.py_function`` / ``tf.numpy_function``
are wrapped once. Each call is recorded as it is made (at pipeline build time, never per
element): the arguments that decide its speed (``num_parallel_calls``, buffer sizes, the
batch size, a cache's file), the function given to it, and the program's own source line
that made the call (the innermost frame in the program's code,
gpudiag.inprogram.usercode). Each dataset made is tagged with a number, so the parent can
follow a pipeline from its source to what the program iterates (``input`` -> ``output``).

A map's function is traced by tf.data when ``map`` is called: the op types of its graph
(and of the functions it calls) are read once then, and the function's record says
which draw random numbers (``random_ops``: tf.random, the stateless random ops, Keras's
augmentation layers; a ``.cache()`` after such a map would freeze the draws) and which run
Python (``python_ops``: EagerPyFunc for tf.py_function, PyFunc / PyFuncStateless for
tf.numpy_function; the GIL runs those one element at a time).

The call itself is the program's: its exceptions are its own, and recording it never
raises into the program.
"""

from __future__ import annotations

import functools
import inspect
import itertools
import linecache
import sys
import threading
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any, TypeVar

from gpudiag.inprogram import trial
from gpudiag.inprogram.agent import caller_frame, patch, wrap_once
from gpudiag.inprogram.functions import code_of
from gpudiag.inprogram.usercode import is_user_file, own_frame
from gpudiag.layout import events

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

TAG = "_gpudiag_dataset"
METHODS = ("map", "prefetch", "cache", "interleave", "batch", "padded_batch", "shuffle",
           # recorded so that a pipeline can be followed through them to its end
           "repeat", "take", "skip", "filter", "unbatch", "rebatch", "shard", "with_options",
           "ignore_errors")
SOURCES = ("from_tensor_slices", "from_tensors", "from_generator")
RECORDED_ARGS = ("num_parallel_calls", "deterministic", "buffer_size", "filename",
                 "cycle_length", "block_length", "batch_size", "drop_remainder")
FUNCTION_ARGS = ("map_func", "generator", "func")
PY_FUNCTIONS = ("py_function", "numpy_function")
# the calls whose output's shapes are compared with their input's (shape_lost)
SHAPE_MAKERS = ("map", "interleave", "from_generator")
# op types of a traced map function: drawing random numbers, running the program's Python
PYTHON_OPS = ("EagerPyFunc", "PyFunc", "PyFuncStateless")
MAX_GRAPH_NODES = 100_000
MAX_DEPTH = 40
_counter = itertools.count(1)
_local = threading.local()
T = TypeVar("T")


def _value(x: Any) -> Any:
    """An argument as plain data: -1 is tf.data.AUTOTUNE; a tensor by its value if eager."""
    if x is None or isinstance(x, bool | str):
        return x
    if isinstance(x, int):
        return "AUTOTUNE" if x == -1 else x
    numpy = getattr(x, "numpy", None)
    if callable(numpy):
        try:
            return _value(numpy().item())
        except Exception:
            return repr(x)[:80]
    return repr(x)[:80]


def _function(fn: Any) -> dict[str, Any] | None:
    code = code_of(fn) if fn is not None else None
    if code is None:
        return None
    return {"name": getattr(fn, "__qualname__", None) or code.co_name,
            "file": code.co_filename, "line": code.co_firstlineno,
            "user": is_user_file(code.co_filename)}


def is_random_op(op_type: str) -> bool:
    """A random number op: RandomUniform, RandomStandardNormal, StatelessRandomUniformV2,
    StatelessRandomGetKeyCounter, RngReadAndSkip, StatefulUniform, Multinomial ..."""
    return "Random" in op_type or op_type.startswith(("Rng", "StatefulUniform",
                                                     "StatefulStandardNormal",
                                                     "StatefulTruncatedNormal")) or \
        op_type in ("Multinomial", "StatelessMultinomial", "TruncatedNormal",
                    "StatelessTruncatedNormal", "StatelessTruncatedNormalV2")


def _traced_ops(dataset: Any) -> dict[str, list[str]] | None:
    """The random and Python op types of the function a map dataset traced (None: no
    traced function to read)."""
    wrapper = getattr(dataset, "_map_func", None)
    fn = getattr(wrapper, "function", None)
    graph = getattr(fn, "graph", None)
    if graph is None:
        return None
    gd = graph.as_graph_def()
    nodes = list(gd.node) + [n for f in gd.library.function for n in f.node_def]
    types = {n.op for n in nodes[:MAX_GRAPH_NODES]}
    return {"random_ops": sorted(t for t in types if is_random_op(t)),
            "python_ops": sorted(t for t in types if t in PYTHON_OPS)}


def _caller(depth: int) -> dict[str, Any] | None:
    """The innermost frame of the program's own code on the stack, from ``depth`` frames up
    (the wrapped call's caller); ``direct``: that frame made the call itself."""
    start = caller_frame(depth)
    frame = own_frame(start, MAX_DEPTH)
    if frame is None:
        return None
    name = frame.f_code.co_filename
    return {"file": name, "line": frame.f_lineno, "function": frame.f_code.co_name,
            "code": linecache.getline(name, frame.f_lineno).strip()[:200],
            "direct": frame is start}


def _unknown(dataset: Any) -> tuple[int, int, str] | None:
    """How little a dataset's element shapes say: (components of unknown rank, unknown
    dimensions, the shapes as text); None where it has no element_spec."""
    spec = getattr(dataset, "element_spec", None)
    tf = sys.modules.get("tensorflow")
    if spec is None or tf is None:
        return None
    shapes = [getattr(s, "shape", None) for s in tf.nest.flatten(spec)]
    ranks = sum(1 for s in shapes if s is not None and s.rank is None)
    dims = sum(sum(1 for d in s.as_list() if d is None) for s in shapes
               if s is not None and s.rank is not None)
    text = tf.nest.map_structure(lambda s: str(getattr(s, "shape", "?")), spec)
    return ranks, dims, str(text).replace("'", "")


def _shape_lost(method: str, this: Any, result: Any) -> str | None:
    """``result``'s element shapes where ``method`` made them less known than ``this``'s
    (a map through tf.py_function or tf.numpy_function: every shape unknown)."""
    if method not in SHAPE_MAKERS:
        return None
    after = _unknown(result)
    before = _unknown(this) if this is not None else (0, 0, "")
    if after is None or before is None:
        return None
    lost = after[0] > before[0] or after[1] > before[1]
    return after[2][:200] if lost else None


class _Recorder:
    def __init__(self, agent: Agent) -> None:
        self.agent = agent

    def record(self, method: str, original: Callable[..., Any], args: tuple[Any, ...],
               kwargs: dict[str, Any], result: Any, source: bool) -> None:
        ba = inspect.signature(original).bind_partial(*args, **kwargs)
        ba.apply_defaults()
        bound = dict(ba.arguments)
        this = None if source else bound.pop("self", None)
        fn = next((bound[k] for k in FUNCTION_ARGS if k in bound), None)
        output = next(_counter)
        try:
            setattr(result, TAG, output)
        except Exception:
            output = 0
        function = _function(fn)
        if method == "map" and function is not None:
            try:
                function.update(_traced_ops(result) or {})
            except Exception as exc:  # a TensorFlow without these internals: said, not raised
                self.agent.hook_error("reading the ops of a Dataset.map function", exc)
        self.agent.emit(events.DatasetCall(method=method,
                        args={k: _value(bound[k]) for k in RECORDED_ARGS if k in bound},
                        function=function,
                        input=getattr(this, TAG, None) if this is not None else None,
                        output=output or None, caller=_caller(3),
                        shape_lost=_shape_lost(method, this, result)))

    def wrap(self, method: str, original: Callable[..., Any], source: bool
             ) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(_local, "inside", False):
                return original(*args, **kwargs)
            frame = caller_frame(1)  # the call's maker: a `gpudiag try` fix's line
            kwargs = self._tried(trial.call_kwargs, method, frame, kwargs)
            _local.inside = True
            try:
                result = original(*args, **kwargs)  # the program's call: its errors
            finally:
                _local.inside = False
            try:
                self.record(method, original, args, kwargs, result, source)
            except Exception as exc:
                self.agent.hook_error(f"recording Dataset.{method}", exc)
            return self._tried(trial.call_result, method, frame, result)
        wrapper.__gpudiag_wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = method
        wrapper.__doc__ = original.__doc__
        return wrapper

    def _tried(self, fix: Callable[[str, Any, T], T], method: str, frame: Any, value: T) -> T:
        """``value`` with `gpudiag try`'s fixes at the frame's line applied (unchanged when
        applying fails: said as a hook error, the program goes on)."""
        try:
            return fix(method, frame, value)
        except Exception as exc:
            self.agent.hook_error(f"applying a trial fix to Dataset.{method}", exc)
            return value

    def wrap_py(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                fn = kwargs.get("func", args[0] if args else None)
                self.agent.emit(events.DatasetCall(method=name, args={}, function=_function(fn),
                                input=None, output=None, caller=_caller(2)))
            except Exception as exc:
                self.agent.hook_error(f"recording tf.{name}", exc)
            return original(*args, **kwargs)
        wrapper.__name__ = name
        wrapper.__doc__ = original.__doc__
        return wrapper


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.data.ops import dataset_ops

    cls = dataset_ops.DatasetV2
    if hasattr(cls.map, "__gpudiag_wrapped__"):
        return
    rec = _Recorder(agent)
    for name in METHODS:
        original = cls.__dict__.get(name)
        if callable(original):
            patch(cls, name, rec.wrap(name, original, source=False))
    for name in SOURCES:
        raw = cls.__dict__.get(name)
        if isinstance(raw, staticmethod):
            patch(cls, name, staticmethod(rec.wrap(name, raw.__func__, source=True)))
    for name in PY_FUNCTIONS:
        wrap_once(tf, name, functools.partial(rec.wrap_py, name), missing_ok=True)
