"""The program's step functions: every tf.function defined in the program's own code.

``Function.__call__`` is wrapped once, for all tf.functions; a function whose Python code
is TensorFlow's or Keras's (Keras's own train function ...) takes the original path after
one dictionary lookup. For a function of the program, called eagerly (not while another
function is being traced), each call is timed (its wall time and its start), its returned
loss kept when it returns one (a float scalar, or the ``loss`` entry of a dict, or the
first float scalar of a tuple) and read, at the batch's write, for the first
ALWAYS_READ_FIRST calls, then at most config.loss_reads_per_s times a second, and for the
last call at exit: no call waits on the device for gpudiag. The rows are appended as
``function_steps`` events (gpudiag.inprogram.recorder.StepBuffer).

After the first call (tracing done): the function's concrete graphs, the device each of
their ops was pinned to (``op.device``, what the program or its strategy asked for, to set
against where the placement log says the op ran), and a fingerprint of the trainable
variables it captured (gpudiag.inprogram.weights), taken again at exit.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from types import CodeType, ModuleType
from typing import TYPE_CHECKING, Any

from gpudiag.inprogram import classevidence, inputwait, tracing, trial, weights
from gpudiag.inprogram.agent import caller_frame, wrap_once
from gpudiag.inprogram.config import UNBUFFERED_FIRST_STEPS
from gpudiag.inprogram.recorder import StepBuffer
from gpudiag.inprogram.tfhooks import record_devices
from gpudiag.inprogram.usercode import is_user_file, own_frame
from gpudiag.layout import events, loopevents

if TYPE_CHECKING:
    from gpudiag.inprogram.agent import Agent

ATTR = "_gpudiag_step_source"
NOT_USER = object()
MAX_PINNED_OPS = 3000
MAX_CONCRETE = 4
ALWAYS_READ_FIRST = 20  # the loss of the first calls is always read (learning needs them)
MAX_TRACE_EVENTS = 50  # per step function, the retraces described (later ones: row flags)


def code_of(fn: Any) -> CodeType | None:
    for _ in range(12):
        code = getattr(fn, "__code__", None)
        if isinstance(code, CodeType):
            return code
        if hasattr(fn, "__func__"):
            fn = fn.__func__
        elif hasattr(fn, "__wrapped__"):
            fn = inspect.unwrap(fn)
            if not hasattr(fn, "__wrapped__") and getattr(fn, "__code__", None) is None:
                fn = type(fn).__dict__.get("__call__")
        elif fn is not None and not inspect.isfunction(fn) and callable(fn):
            fn = type(fn).__dict__.get("__call__")
        else:
            return None
    return None


def _is_scalar_float(x: Any) -> bool:
    shape = getattr(x, "shape", None)
    dtype = getattr(x, "dtype", None)
    return (shape is not None and getattr(shape, "rank", None) == 0
            and bool(getattr(dtype, "is_floating", False)) and hasattr(x, "numpy"))


def loss_path(out: Any) -> tuple[Any, ...] | None:
    """Where the loss tensor is among a step function's outputs: () for the output
    itself, (key,) in a dict, (index,) in a list or tuple; None where there is none."""
    if _is_scalar_float(out):
        return ()
    if isinstance(out, dict):
        keys = [k for k in out if k == "loss"] + [k for k in out if "loss" in str(k)]
        for k in keys:
            if _is_scalar_float(out[k]):
                return (k,)
        return None
    if isinstance(out, list | tuple):
        for n, item in enumerate(out):
            if _is_scalar_float(item):
                return (n,)
    return None


class LossFinder:
    """The loss among a step function's outputs, for every call of one step function, at
    the cost of a few type checks a call
    once the loss was found: a traced function returns the same structure each call, so
    where its loss was (and the tensor type it had) is kept, and looked for again only
    when the output no longer has that shape."""

    def __init__(self) -> None:
        self._key: tuple[Any, tuple[Any, ...], Any, Any] | None = None

    def __call__(self, out: Any) -> Any:
        key = self._key
        if key is not None and type(out) is key[0]:
            kept: Any = None
            try:  # noqa: SIM105 (every step: a try costs less than contextlib.suppress)
                kept = out if not key[1] else out[key[1][0]]
            except (LookupError, TypeError):
                pass
            if kept is not None and type(kept) is key[2] and kept.dtype is key[3]:
                return kept
        path = loss_path(out)
        if path is None:
            self._key = None
            return None
        loss: Any = out if not path else out[path[0]]
        self._key = (type(out), path, type(loss), loss.dtype)
        return loss


def _resolve(row: dict[str, Any]) -> None:
    loss = row.get("loss")
    if loss is not None and not isinstance(loss, float):
        value = loss.numpy()
        if getattr(value, "ndim", 0) == 0:
            row["loss"] = float(value)
        else:  # a function traced again to return more than a scalar where its loss was
            del row["loss"]


def _user_caller(depth: int = 2) -> dict[str, Any] | None:
    """The program's frame that called the step function (the loop's line), or None."""
    try:
        frame = own_frame(caller_frame(depth), 8)
        if frame is not None:
            return {"file": frame.f_code.co_filename, "line": frame.f_lineno,
                    "function": frame.f_code.co_name}
    except Exception:
        pass
    return None


class StepSource:
    """One of the program's tf.functions."""

    def __init__(self, agent: Agent, code: CodeType, qualname: str) -> None:
        self.agent = agent
        self.name = qualname
        self.label = f"tf.function {qualname}"
        self.file, self.line = code.co_filename, code.co_firstlineno
        self.calls = 0
        self.loss_interval_s = 1.0 / max(1, agent.config.loss_reads_per_s)
        self.last_loss_read = -1e9
        self.buffer = StepBuffer(agent.emit, "function_steps", agent.config.flush_interval_s,
                                 UNBUFFERED_FIRST_STEPS, _resolve, function=qualname)
        self.variables: list[Any] = []
        self.last_loss: tuple[int, Any] | None = None  # the latest call's loss, unread
        self.find_loss = LossFinder()
        self.called_at: dict[str, Any] | None = None  # the program's line of the first call
        self.new_object = False  # the next call is the first of another tf.function object
        self.last_args: dict[str, dict[str, Any]] | None = None  # the last trace's arguments
        self.traces = 0
        agent.on_exit(self.at_exit)

    def call(self, original: Callable[..., Any], fn: Any, args: tuple[Any, ...],
             kwds: dict[str, Any]) -> Any:
        index = self.calls
        self.calls += 1
        if index == 0:
            self.called_at = _user_caller()
        profile = self.agent.profile
        if profile is not None and not profile.done:
            profile.step_begin(self, index)
        cache = fn.__dict__.get("_function_cache")
        before = -1 if cache is None else len(cache)
        traced_s = tracing.CLOCK.seconds
        start = time.time()
        t0 = time.perf_counter()
        out = original(fn, *args, **kwds)  # the program's call: its exceptions are its own
        t1 = time.perf_counter()
        try:
            traced = self.new_object or (cache is not None and len(cache) != before)
            self._after(fn, out, index, start, (t0, t1, traced))
            if traced:
                self._traced(fn, index, args, kwds, (tracing.CLOCK.seconds - traced_s,
                                                     t1 - t0))
        except Exception as exc:
            self.agent.hook_error(f"after a call of {self.name}", exc)
        if _trial_done(self.name, self.calls):  # `gpudiag try`: the trial's steps made
            trial.stopped()
            raise SystemExit(0)
        return out

    def _traced(self, fn: Any, index: int, args: tuple[Any, ...], kwds: dict[str, Any],
                times: tuple[float, float]) -> None:
        """This call traced the function: its row says so; a retrace is described."""
        new_object, self.new_object = self.new_object, False
        self.traces += 1
        now = tracing.describe_args(fn._python_function, args, kwds)
        was, self.last_args = self.last_args, now
        if index == 0 or self.traces > MAX_TRACE_EVENTS:
            return
        self.agent.emit(loopevents.Trace(
            function=self.name, call=index, traces=self.traces, trace_s=times[0],
            call_s=times[1],
            changed=[] if was is None or new_object else tracing.changed(was, now),
            new_object=new_object, created_at=fn.__dict__.get(tracing.CREATED_ATTR),
            called_at=_user_caller(3)))

    def _after(self, fn: Any, out: Any, index: int, start: float,
               call: tuple[float, float, bool]) -> None:
        profile = self.agent.profile
        if profile is not None and not profile.done:
            profile.step_end(self, index)
        t0, t1, traced = call
        row: dict[str, Any] = {"i": index, "t0": start, "dt": t1 - t0}
        if traced:
            row["tracing"] = True
        waited = inputwait.take()
        if waited is not None:
            row["wait_s"] = waited
        loss = self.find_loss(out)
        if loss is not None:
            self.last_loss = (index, loss)
            if index < ALWAYS_READ_FIRST or t1 - self.last_loss_read >= self.loss_interval_s:
                row["loss"] = loss
                self.last_loss_read = t1
        self.buffer.add(row)
        if index == 0:
            from gpudiag.inprogram.agent import guard

            guard(f"first call of {self.name}", self.first_call, fn)

    def first_call(self, fn: Any) -> None:
        concrete = list(fn._list_all_concrete_functions())[:MAX_CONCRETE]
        graphs = []
        trainable: list[Any] = []
        cross_entropy: list[dict[str, Any]] = []
        for cf in concrete:
            ops = cf.graph.get_operations()
            cross_entropy += classevidence.cross_entropy_ops(ops)
            pinned = [[op.name, op.type, op.device] for op in ops if op.device]
            name = cf.name.decode() if isinstance(cf.name, bytes) else str(cf.name)
            graphs.append({"name": name, "ops": len(ops), "pinned": pinned[:MAX_PINNED_OPS],
                           "pinned_total": len(pinned)})
            trainable += list(cf.trainable_variables)
        self.variables = weights.track(trainable)
        self.agent.emit(loopevents.Function(function=self.name, file=self.file, line=self.line,
                        graphs=graphs, trainable_variables=len(self.variables),
                        trainable_bytes_by_device=weights.bytes_by_device(trainable),
                        cross_entropy=cross_entropy,
                        classes=classevidence.classes_of(cross_entropy),
                        called_at=self.called_at,
                        jit_compile=fn.__dict__.get("_jit_compile")
                        if isinstance(fn.__dict__.get("_jit_compile"), bool) else None))
        record_devices("step function")
        self._weights("after-first-call")

    def _weights(self, phase: str) -> None:
        if self.variables:
            self.agent.emit(events.Weights(source=self.label, phase=phase, calls=self.calls,
                            fingerprint=weights.fingerprint(self.variables)))

    def at_exit(self) -> None:
        self.buffer.flush()
        if self.last_loss is not None:  # the last call's loss, read once the program is done
            index, loss = self.last_loss
            self.agent.emit(loopevents.FunctionSteps(function=self.name,
                            rows=(loopevents.FunctionRow(i=index, loss=float(loss.numpy())),)))
        self._weights("exit")


def _trial_done(name: str, calls: int) -> bool:
    try:
        return trial.ends_after(name, calls)
    except Exception:  # never into the program: the loop goes on to its end
        return False


def install(agent: Agent, tf: ModuleType) -> None:
    from tensorflow.python.eager import context
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf

    wrap_once(pf.Function, "__call__", lambda original: _call(
        agent, pf.Function, context.executing_eagerly, original))


def _call(agent: Agent, cls: type, executing_eagerly: Callable[[], bool],
          original: Callable[..., Any]) -> Callable[..., Any]:
    """tf.function's __call__, each eager call of the program's own function a step of it
    (the clocks of its traces set up first)."""
    tracing.install_clock()
    tracing.install_created_at(cls, code_of)
    # one source per Python function: a tf.function object made again of it (in a loop)
    # continues its loop, its first call marked as a new object's
    by_code: dict[CodeType, StepSource] = {}

    def classify(fn: Any) -> Any:
        try:
            code = code_of(fn.python_function)
            if code is None or not is_user_file(code.co_filename):
                return NOT_USER
            known = by_code.get(code)
            if known is not None:
                known.new_object = True
                return known
            name = getattr(fn.python_function, "__qualname__", None) or code.co_name
            source = by_code[code] = StepSource(agent, code, str(name))
            return source
        except Exception as exc:
            agent.hook_error("classifying a tf.function", exc)
            return NOT_USER

    def __call__(self: Any, *args: Any, **kwds: Any) -> Any:
        # the program's exceptions: patch()'s gate drops gpudiag's frames from them
        source = self.__dict__.get(ATTR)
        # one made under an earlier install (a notebook's earlier watch()): this one's
        if source is None or (source is not NOT_USER and source.agent is not agent):
            source = self.__dict__[ATTR] = classify(self)
        if source is NOT_USER or not executing_eagerly():
            return original(self, *args, **kwds)
        return source.call(original, self, args, kwds)

    return __call__
