"""The event protocol between the program and gpudiag: children/program/events-<pid>.jsonl.

What the in-program agent (gpudiag.inprogram) records, one event a line, each a JSON
object: the header ``{"kind": KIND, "v": PROTOCOL_VERSION, "t": <Unix s>, "pid": <pid>,
"seq": <n in its process>}`` and the fields of the event's record below, under the same
names (``class_name`` is written ``class``: the one name Python forbids). Every event the
agent writes is one of these frozen records, written by :func:`encode`; gpudiag reads
every line through :func:`check` (:func:`decode`), which never raises: a line of a kind
it does not know, or of a newer protocol version, becomes an :class:`Unknown`; a field
missing (a file of an older gpudiag) takes the field's default; a field of another shape
than its annotation's, inner types included (a list of dicts where strings belong), or a
line nested deeper than :data:`MAX_DEPTH`, makes the line a :class:`BadLine` with the
field's name: that line is unreadable, the others are read.

Units are in the names (``_s`` seconds, ``_unix_s`` wall-clock Unix seconds, ``_bytes``);
``caller`` and frame dicts are ``{file, line, function[, code]}`` in the program.
Imported inside the user's program: the standard library only, nothing heavy.
"""

from __future__ import annotations

import json
import types
import typing
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

PROTOCOL_VERSION = 1  # lines without "v" (gpudiag before the protocol) read as version 1
HEADER = ("kind", "v", "t", "pid", "seq")
_WIRE = {"class_name": "class"}  # attribute -> JSON name, where Python forbids the name


@dataclass(frozen=True)
class Event:
    """One event the agent records (the base of every kind)."""

    KIND: ClassVar[str] = ""


# ------------------------------------------------------------------- per-step rows
@dataclass(frozen=True)
class FitRow:
    """One Keras batch (or, with ``n`` > 1, the last of ``n`` aggregated batches)."""

    i: int = 0  # the step's index in this fit recorder, from 0
    epoch: int | None = None
    batch: int | None = None  # Keras's batch index at on_train_batch_end (the last of a
    # call of steps_per_execution steps)
    t0: float | None = None  # Unix s at on_train_batch_begin
    t_end: float | None = None  # Unix s at on_train_batch_end
    logs: dict[str, Any] = field(default_factory=dict)  # Keras's batch logs (loss, metrics)
    n: int = 1


@dataclass(frozen=True)
class FunctionRow:
    """One call of a step tf.function (a row may come again with the call's loss)."""

    i: int = 0
    t0: float | None = None  # Unix s at the call
    dt: float | None = None  # the call's own seconds
    loss: float | None = None
    n: int = 1
    tracing: bool = False  # the call traced the function (a new concrete function)
    wait_s: float | None = None  # seconds in the program's next(iterator) since the last call


@dataclass(frozen=True)
class SessionRow:
    """One Session.run of a fetch group."""

    i: int = 0
    t0: float | None = None
    dt: float | None = None
    value: float | None = None  # the first scalar fetched (a loss, most often)
    traced: bool = False  # a FULL_TRACE run (slower: out of the timing)
    global_step: int | None = None
    n: int = 1


# ------------------------------------------------------------------------ the kinds
@dataclass(frozen=True)
class Process(Event):
    KIND = "process"
    ppid: int | None = None
    argv: list[str] = field(default_factory=list)
    executable: str | None = None
    python: str | None = None  # version, 3.11.9
    cwd: str | None = None
    # agent.RECORDED_ENV as the process started
    env: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class TfImport(Event):
    KIND = "tf_import"
    version: str | None = None
    cpp_log_level: str | None = None  # the program's own, as it imported TensorFlow
    # TensorFlow's C++ log did not reach gpudiag (fd 2 was a file of the program's own)
    cpp_log_level_overridden: bool = False
    placement_log: bool = False  # gpudiag's placement window was set up
    initialized_at_import: bool | None = None
    caller: dict[str, Any] | None = None
    modules_before: list[str] = field(default_factory=list)  # keras, jax ... imported first


@dataclass(frozen=True)
class KerasImport(Event):
    KIND = "keras_import"
    module: str = ""
    version: str | None = None


@dataclass(frozen=True)
class ConfigCall(Event):
    KIND = "config_call"
    api: str = ""
    order: int = 0
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    initialized_before: bool | None = None
    caller: dict[str, Any] | None = None
    error_type: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class Devices(Event):
    KIND = "devices"
    reason: str = "?"
    physical: list[dict[str, Any]] = field(default_factory=list)  # {name, device_type}
    logical: list[dict[str, Any]] = field(default_factory=list)
    gpus: list[dict[str, Any]] = field(default_factory=list)
    soft_placement: bool | None = None
    cuda_build: bool | None = None
    env: dict[str, str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class Strategy(Event):
    KIND = "strategy"
    class_name: str = "?"
    module: str = ""
    num_replicas_in_sync: int | None = None
    worker_devices: list[str] = field(default_factory=list)
    parameter_devices: list[str] = field(default_factory=list)
    cross_device_ops: str | None = None
    communication_implementation: str | None = None
    nccl: bool = False
    cluster: dict[str, Any] | None = None
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class ClusterJoin(Event):
    KIND = "cluster_join"
    via: str = "?"
    task_type: str | None = None
    task_id: int | None = None
    cluster_spec: dict[str, list[str]] | None = None
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class ClusterJoined(Event):
    KIND = "cluster_joined"
    via: str = "?"


@dataclass(frozen=True)
class ClusterJoinFailed(Event):
    KIND = "cluster_join_failed"
    via: str = "?"


@dataclass(frozen=True)
class PlacementLogAsked(Event):
    """gpudiag asked TensorFlow for its placement log (a cluster task)."""

    KIND = "placement_log_asked"
    reason: str = ""


@dataclass(frozen=True)
class FitBegin(Event):
    KIND = "fit_begin"
    params: dict[str, Any] = field(default_factory=dict)
    batch_size: int | None = None
    examples: int | None = None
    model: str | None = None
    model_id: int | None = None
    output_width: int | None = None
    loss: str | None = None  # repr of model.loss
    optimizer: str | None = None
    learning_rate: float | None = None
    strategy: str | None = None
    replicas: int | None = None
    trainable_parameters: int | None = None
    trainable_bytes: int | None = None
    dtype_policy: str | None = None  # the model's Keras dtype policy: float32, mixed_float16 ...
    keras: str | None = None  # the model's Keras package: keras (Keras 3) or tf_keras
    reduction: str | None = None  # model.distribute_reduction_method: auto, sum, first ...
    multi_worker: bool | None = None  # its strategy in multi-worker mode (a cluster)
    # what the loss is given (gpudiag.inprogram.lossfacts): the loss and the last layer,
    # the labels' and inputs' summaries (None: not arrays; data_unread says why), fit's line
    setup: dict[str, Any] | None = None
    labels: dict[str, Any] | None = None
    inputs: dict[str, Any] | None = None
    data_unread: str | None = None
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class FitSteps(Event):
    KIND = "fit_steps"
    rows: tuple[FitRow, ...] = ()


@dataclass(frozen=True)
class FitEpoch(Event):
    KIND = "fit_epoch"
    logs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class FitEnd(Event):
    KIND = "fit_end"
    iterations: int | None = None  # optimizer.iterations: the global step


@dataclass(frozen=True)
class FunctionSteps(Event):
    KIND = "function_steps"
    function: str = ""
    rows: tuple[FunctionRow, ...] = ()


@dataclass(frozen=True)
class Function(Event):
    """A step tf.function's first call: its graphs and what they hold."""

    KIND = "function"
    function: str = ""
    file: str | None = None
    line: int | None = None
    # {name, ops, pinned: [[node, op, device]]}
    graphs: list[dict[str, Any]] = field(default_factory=list)
    trainable_variables: int | None = None
    trainable_bytes_by_device: dict[str, int] | None = None
    cross_entropy: list[dict[str, Any]] = field(default_factory=list)  # {op, node, classes}
    classes: int | None = None
    called_at: dict[str, Any] | None = None
    jit_compile: bool | None = None  # tf.function(jit_compile=...): XLA compiles the step


@dataclass(frozen=True)
class Trace(Event):
    """A step tf.function traced again (a call after its first that traced it, or a new
    tf.function object made of the same Python function): what changed and what it cost."""

    KIND = "trace"
    function: str = ""
    call: int = 0  # the call (from 0, over every object of the function) that traced
    traces: int = 0  # traces so far, over every object of the function
    trace_s: float | None = None  # seconds building the graph in that call
    call_s: float | None = None  # the whole call's seconds
    # what differs from the arguments of the trace before: {arg, was, now, kind}; kind:
    # python (a Python value), shape, dtype, type (another Python type)
    changed: list[dict[str, Any]] = field(default_factory=list)
    new_object: bool = False  # a new tf.function object of the same Python function
    created_at: dict[str, Any] | None = None  # the program's line that made the object
    called_at: dict[str, Any] | None = None  # the program's line of the call


@dataclass(frozen=True)
class EagerLoop(Event):
    """A training step the program runs eagerly (no tf.function): its first
    ``GradientTape.gradient`` outside any tf.function, called from the program's code."""

    KIND = "eager_loop"
    step: str = ""  # the program's function that computes the gradient (<module> at top)
    file: str | None = None
    line: int | None = None  # the line of the gradient call
    def_line: int | None = None  # the step function's def line (None at module level)
    code: str | None = None  # the gradient call's source line


@dataclass(frozen=True)
class EagerSteps(Event):
    KIND = "eager_steps"
    step: str = ""
    rows: tuple[FunctionRow, ...] = ()  # t0: the gradient call's time (start to start)


@dataclass(frozen=True)
class CallbackTimes(Event):
    """The program's own Keras callbacks' time in one fit so far (cumulative), written at
    each epoch's end and at the end: {class, file, line, methods: {name: {calls, total_s,
    max_s}}} per callback."""

    KIND = "callback_times"
    epoch: int | None = None
    callbacks: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Compile(Event):
    """A Keras ``Model.compile`` call: where, and the arguments that change a step."""

    KIND = "compile"
    model: str | None = None
    model_id: int | None = None
    steps_per_execution: int | None = None
    jit_compile: str | None = None  # repr: True, False, "auto"
    run_eagerly: bool | None = None
    caller: dict[str, Any] | None = None  # {file, line, function, code}


@dataclass(frozen=True)
class Weights(Event):
    KIND = "weights"
    source: str = ""
    phase: str = ""
    calls: int = 0
    fingerprint: list[list[float]] | None = None


@dataclass(frozen=True)
class Stall(Event):
    KIND = "stall"
    waited_s: float = 0.0
    timeout_s: float = 0.0
    steps: int = 0
    loop: dict[str, Any] | None = None  # the step buffer's fields: {function} or {group, ...}
    loop_kind: str | None = None  # fit_steps, function_steps, session_steps
    median_period_s: float | None = None
    where: dict[str, Any] = field(default_factory=dict)  # {kind, frame, waiting}
    threads: list[dict[str, Any]] = field(default_factory=list)  # {name, stepping, frames}
    since: str = "step"  # step | cluster_joined


@dataclass(frozen=True)
class StallEnd(Event):
    KIND = "stall_end"
    after_s: float = 0.0


@dataclass(frozen=True)
class PlacementWindow(Event):
    """A placement window opened (the one that closed it is :class:`Placement`)."""

    KIND = "placement_window"
    window: int = 0
    reason: str = ""


@dataclass(frozen=True)
class Placement(Event):
    KIND = "placement"
    window: int = 0
    reason: str = ""
    graphs: list[dict[str, Any]] = field(default_factory=list)  # {eager, nodes: [[n, op, d]]}
    nodes_left_out: int = 0


@dataclass(frozen=True)
class Session(Event):
    KIND = "session"
    target: str = ""
    config: dict[str, Any] | None = None  # the ConfigProto's summary
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class SessionSteps(Event):
    KIND = "session_steps"
    group: int = 0
    fetches: list[str] = field(default_factory=list)
    rows: tuple[SessionRow, ...] = ()


@dataclass(frozen=True)
class StepStats(Event):
    KIND = "step_stats"
    group: str = "?"
    call: int | None = None
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)
    pinned: list[dict[str, Any]] = field(default_factory=list)
    node_devices: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class DatasetCall(Event):
    KIND = "dataset_call"
    method: str = "?"
    args: dict[str, Any] = field(default_factory=dict)
    function: dict[str, Any] | None = None
    input: int | None = None
    output: int | None = None
    caller: dict[str, Any] | None = None
    # the made dataset's element shapes (``(<unknown>, ())``), where this call made them
    # less known than its input's (a map through tf.py_function or tf.numpy_function, a
    # from_generator without shapes): None where it did not
    shape_lost: str | None = None


@dataclass(frozen=True)
class Crash(Event):
    KIND = "crash"
    type: str = "?"
    module: str = ""
    message: str = ""
    thread: str = ""
    frames: list[dict[str, Any]] = field(default_factory=list)
    user_frame: dict[str, Any] | None = None
    causes: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class Profile(Event):
    KIND = "profile"
    status: str = "?"  # started | stopped | stopped-at-exit | failed | skipped
    logdir: str = ""
    source: str | None = None
    first_step: int | None = None
    steps: list[int] = field(default_factory=list)
    error: str | None = None


@dataclass(frozen=True)
class TfLog(Event):
    KIND = "tf_log"
    logger: str = ""
    level: str = ""
    message: str = ""
    source: str = ""  # file:line
    shown: bool = False


@dataclass(frozen=True)
class DeviceScope(Event):
    KIND = "device_scope"
    device: str = ""
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class PyWarning(Event):
    KIND = "py_warning"
    category: str = "Warning"
    message: str = ""
    file: str = ""
    line: int = 0
    user_frame: dict[str, Any] | None = None


@dataclass(frozen=True)
class HookError(Event):
    KIND = "hook_error"
    where: str = ""
    type: str = ""
    message: str = ""
    traceback: str = ""


@dataclass(frozen=True)
class HookNote(Event):
    KIND = "hook_note"
    where: str = ""
    message: str = ""


@dataclass(frozen=True)
class Exit(Event):
    KIND = "exit"
    hook_errors: int = 0  # errors inside gpudiag's hooks, those not written included
    stream_errors: int = 0  # exceptions the program's own streams raised at gpudiag's calls


@dataclass(frozen=True)
class Tf1Distribution(Event):
    """A tf.compat.v1 distribution construct the program built (gpudiag.inprogram.tf1dist):
    ``api`` replica_device_setter (args: ps_tasks, ps_device, worker_device, cluster),
    MonitoredTrainingSession (is_chief, master), Supervisor (is_chief),
    SyncReplicasOptimizer (replicas_to_aggregate, total_num_replicas, optimizer),
    compute_gradients (device, scope, graph, variables, tower) or apply_gradients (graph,
    variables, towers_combined, combine_ops, variable_devices, variable_ops)."""

    KIND = "tf1_distribution"
    api: str = ""
    args: dict[str, Any] = field(default_factory=dict)
    caller: dict[str, Any] | None = None


@dataclass(frozen=True)
class InputFloor(Event):
    """What one ``next()`` of a tf.data iterator costs when its batch is ready: a dataset
    of the program's own batch, repeated and prefetched (its buffer full), read ``calls``
    times (gpudiag.inprogram.inputwait). The part of a step's wait prefetch cannot hide."""

    KIND = "input_floor"
    floor_s: float | None = None  # the median call
    p10_s: float | None = None
    calls: int = 0


@dataclass(frozen=True)
class CpuUse(Event):
    """The program's CPU time over wall time for ``steps`` steps of its profiled loop right
    after the profiled window (gpudiag.inprogram.profilewindow): how many cores it kept
    busy in its steady state, what a fix that adds threads (a parallel map) has left."""

    KIND = "cpu_use"
    source: str | None = None
    steps: int = 0
    cpu_s: float = 0.0
    wall_s: float = 0.0
    cores: int = 0  # the cores the process may run on (os.sched_getaffinity)


@dataclass(frozen=True)
class PyDataInput(Event):
    """A Python data class Keras 3's fit took batches from (gpudiag.inprogram.pydata):
    a ``keras.utils.PyDataset`` (its ``__getitem__``, or the wait on its workers' queue)
    or a Python generator, with the seconds spent taking its batches, over every batch."""

    KIND = "py_data_input"
    source: str = ""  # PyDataset | generator
    class_name: str = ""
    workers: int | None = None
    use_multiprocessing: bool | None = None
    max_queue_size: int | None = None
    batches: int = 0
    total_s: float = 0.0
    median_s: float | None = None  # a batch taken (the wait for it, where it is taken)
    p90_s: float | None = None
    cpu_median_s: float | None = None  # the CPU time a batch costs (thread time)
    cpu_where: str | None = None  # taken (made where it is taken) | workers (threads)


@dataclass(frozen=True)
class KerasCalls(Event):
    """The Keras model calls the program made one by one (gpudiag.inprogram.kerascalls),
    per call site so far (cumulative: the latest stands): {method, file, line, function,
    code, model, calls, total_s, first_s, max_s, median_s (the calls after the first),
    rows_min, rows_max (each call's leading dimension), models (calls on a new model
    object), trace_s (tf.function tracing inside the calls)} each."""

    KIND = "keras_calls"
    sites: list[dict[str, Any]] = field(default_factory=list)
    left_out_calls: int = 0  # calls at sites past the bound
    first_call_t_unix_s: float | None = None
    # [calls so far, the process's resident bytes] after every so many calls (bounded)
    rss_after_calls: list[list[int]] = field(default_factory=list)


@dataclass(frozen=True)
class HostReads(Event):
    """Tensors the program's own lines read back to Python (gpudiag.inprogram.hostreads),
    per line so far (cumulative: the latest stands): {file, line, function, code, how
    (float(), .numpy(), ...), reads, total_s, max_s, median_s} each."""

    KIND = "host_reads"
    sites: list[dict[str, Any]] = field(default_factory=list)
    left_out_reads: int = 0  # reads at lines past the bound


@dataclass(frozen=True)
class Unknown(Event):
    """A line this gpudiag cannot read as one of its kinds: another kind, or a newer
    protocol version. Kept whole, never an error."""

    kind: str = ""
    version: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


KINDS: dict[str, type[Event]] = {cls.KIND: cls for cls in (
    Process, TfImport, KerasImport, ConfigCall, Devices, Strategy, ClusterJoin, ClusterJoined,
    ClusterJoinFailed, PlacementLogAsked, FitBegin, FitSteps, FitEpoch, FitEnd, FunctionSteps,
    Function, Weights, Stall, StallEnd, PlacementWindow, Placement, Session, SessionSteps,
    StepStats, DatasetCall, Crash, Profile, TfLog, DeviceScope, PyWarning, HookError, HookNote,
    Exit, Tf1Distribution, Trace, EagerLoop, EagerSteps, CallbackTimes, Compile, InputFloor, CpuUse,
    PyDataInput, KerasCalls, HostReads)}
ROWS: dict[str, type] = {FitSteps.KIND: FitRow, FunctionSteps.KIND: FunctionRow,
                         SessionSteps.KIND: SessionRow, EagerSteps.KIND: FunctionRow}


@dataclass(frozen=True)
class Recorded:
    """One decoded line: the header and the event."""

    pid: int
    seq: int
    t_unix_s: float | None
    event: Event


def steps_event(kind: str, rows: list[dict[str, Any]], loop: dict[str, Any]) -> Event:
    """A step buffer's rows (plain dicts, built per step) as the ``kind`` event."""
    row_cls = ROWS[kind]
    names = {f.name for f in fields(row_cls)}
    return KINDS[kind](rows=tuple(row_cls(**{k: v for k, v in r.items() if k in names})
                                  for r in rows), **loop)  # type: ignore[call-arg]


# --------------------------------------------------------------------------- encode
def _plain(value: Any) -> Any:
    """JSON fallback: numpy scalars and arrays to numbers/lists, anything else to repr."""
    for attr in ("item", "tolist"):
        fn = getattr(value, attr, None)
        if callable(fn):
            try:
                return fn()
            except Exception:
                pass
    return repr(value)


def _row_json(row: Any) -> dict[str, Any]:
    out = {}
    for f in fields(row):
        value = getattr(row, f.name)
        if value != f.default:  # defaults are left out: a row stays ~80 bytes
            out[f.name] = value
    out["i"] = row.i
    return out


def wire(event: Event) -> dict[str, Any]:
    """The event's fields under their JSON names (no header)."""
    out = {}
    for f in fields(event):
        value = getattr(event, f.name)
        if f.name == "rows":
            value = [_row_json(r) for r in value]
        out[_WIRE.get(f.name, f.name)] = value
    return out


def encode(event: Event, *, t_unix_s: float, pid: int, seq: int) -> str:
    """One JSON line (without its newline)."""
    header = {"kind": event.KIND, "v": PROTOCOL_VERSION, "t": t_unix_s, "pid": pid, "seq": seq}
    return json.dumps({**header, **wire(event)}, default=_plain)


# --------------------------------------------------------------------------- decode
#: The deepest nesting a line may hold (gpudiag's own lines: under 10). A deeper line is
#: unreadable: every reader after decode may recurse over what it holds.
MAX_DEPTH = 32
_HINTS: dict[type, dict[str, Any]] = {}


@dataclass(frozen=True)
class BadLine:
    """A line that is not an event this gpudiag can read, and why (the first field that
    does not fit, named ``kind.field``)."""

    reason: str


class _Misfit(Exception):
    """A value that does not have its annotation's shape (where: the field's path)."""

    def __init__(self, where: str, want: str) -> None:
        super().__init__(f"{where} is not {want}")


def _depth(value: Any) -> int:
    """How deep ``value`` nests (iteratively: a deep value never recurses here)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            todo += [(v, depth + 1) for v in (item.values() if isinstance(item, dict)
                                              else item)]
    return deepest


def _name(hint: Any) -> str:
    plain = isinstance(hint, type) and typing.get_origin(hint) is None
    return hint.__name__ if plain else str(hint).replace("typing.", "")


# the JSON values a scalar field takes (a bool is no number)
_SCALARS: dict[Any, Callable[[Any], bool]] = {
    type(None): lambda v: v is None,
    float: lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    int: lambda v: isinstance(v, int) and not isinstance(v, bool),
    str: lambda v: isinstance(v, str),
    bool: lambda v: isinstance(v, bool),
}


def _check(value: Any, hint: Any, where: str) -> None:
    """Raise _Misfit unless the JSON ``value`` has the shape of ``hint``, inner types
    included (every element of a list, every key and value of a dict)."""
    if hint is Any:
        return
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        arms = [h for h in typing.get_args(hint) if h is not type(None) or value is None]
        if len(arms) == 1:  # X | None holding a value: X's reason, the inner field named
            _check(value, arms[0], where)
            return
        if any(_fits(value, h) for h in arms):
            return
        raise _Misfit(where, _name(hint))
    ok = True
    if hint in _SCALARS:
        ok = _SCALARS[hint](value)
    elif origin in (list, tuple):
        if not isinstance(value, list):
            raise _Misfit(where, _name(hint))
        inner = typing.get_args(hint)[0] if typing.get_args(hint) else Any
        for i, item in enumerate(value):
            _check(item, inner, f"{where}[{i}]")
    elif origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise _Misfit(where, _name(hint))
        _, inner = typing.get_args(hint) or (str, Any)
        for k, item in value.items():
            _check(item, inner, f"{where}.{k}")
    else:
        ok = isinstance(value, origin or hint)
    if not ok:
        raise _Misfit(where, _name(hint))


def _fits(value: Any, hint: Any) -> bool:
    try:
        _check(value, hint, "")
    except _Misfit:
        return False
    return True


def _build(cls: type, data: dict[str, Any], where: str) -> Any:
    """``cls`` from a JSON object: a field missing (or null where the field cannot be
    null: a file of an older gpudiag) takes its default; a field present of another
    shape raises _Misfit."""
    hints = _HINTS.get(cls)
    if hints is None:
        hints = _HINTS[cls] = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in fields(cls):
        name = _WIRE.get(f.name, f.name)
        if name not in data or (data[name] is None and not _fits(None, hints[f.name])):
            continue  # its default
        value = data[name]
        if f.name == "rows":
            if not isinstance(value, list):
                raise _Misfit(f"{where}.rows", "a list")
            row_cls = typing.get_args(hints["rows"])[0]
            rows = []
            for i, r in enumerate(value):
                if not isinstance(r, dict) or not _fits(r.get("i"), int):
                    raise _Misfit(f"{where}.rows[{i}]", "a row with its index i")
                rows.append(_build(row_cls, r, f"{where}.rows[{i}]"))
            value = tuple(rows)
        else:
            _check(value, hints[f.name], f"{where}.{name}")
        values[f.name] = value
    return cls(**values)


def check(obj: Any) -> Recorded | BadLine:
    """A parsed JSON line as a Recorded event, or why it is none (no kind or pid, a field
    of another shape, too deep). Never raises."""
    try:
        return _check_event(obj)
    except Exception as exc:  # a value no check foresaw: still never an exception
        return BadLine(f"{type(exc).__name__}: {str(exc)[:120]}")


def _check_event(obj: Any) -> Recorded | BadLine:
    if not isinstance(obj, dict):
        return BadLine(f"a JSON {type(obj).__name__}, not an object")
    if not isinstance(obj.get("kind"), str) or not _fits(obj.get("pid"), int):
        return BadLine("no kind or pid")
    kind: str = obj["kind"][:60]
    if _depth(obj) > MAX_DEPTH:
        return BadLine(f"{kind}: nested deeper than {MAX_DEPTH}")
    version = obj.get("v", PROTOCOL_VERSION)
    if not _fits(version, int):
        return BadLine(f"{kind}.v is not an int")
    if obj.get("seq") is not None and not _fits(obj["seq"], int):
        return BadLine(f"{kind}.seq is not an int")
    if obj.get("t") is not None and not _fits(obj["t"], float):
        return BadLine(f"{kind}.t is not a number")
    seq: int = obj.get("seq") or 0
    t = obj.get("t")
    cls = KINDS.get(obj["kind"])
    if cls is None or version > PROTOCOL_VERSION:
        return Recorded(obj["pid"], seq, t, Unknown(
            kind=kind, version=version,
            fields={k: v for k, v in obj.items() if k not in HEADER}))
    try:
        event = _build(cls, obj, kind)
    except _Misfit as exc:
        return BadLine(str(exc))
    return Recorded(obj["pid"], seq, t, event)


def decode(obj: Any) -> Recorded | None:
    """A parsed JSON line as a Recorded event; None when it is none (:func:`check` says
    why). Never raises."""
    found = check(obj)
    return found if isinstance(found, Recorded) else None


def check_line(line: str | bytes) -> Recorded | BadLine:
    """One line of an events file, or why it is no event (not JSON, too deep for JSON's
    reader, no event). Never raises."""
    try:
        obj = json.loads(line)
    except RecursionError:
        return BadLine(f"nested deeper than {MAX_DEPTH}")
    except ValueError as exc:  # UnicodeDecodeError included
        return BadLine(f"not JSON ({str(exc).splitlines()[0][:80]})")
    return check(obj)


def decode_line(line: str | bytes) -> Recorded | None:
    """One line of an events file (None: not JSON, or no event)."""
    found = check_line(line)
    return found if isinstance(found, Recorded) else None
