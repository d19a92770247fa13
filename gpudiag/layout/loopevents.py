"""The events of the program's training loops (the protocol: layout/events.py): Keras fits
and their per-batch rows, step tf.functions (their calls, traces and graphs), eager steps,
tf.compat.v1 sessions' runs, stalls, and what feeds and slows a step (input waits, CPU
use, Python data, Keras model calls one at a time, the program's callbacks).

Imported inside the user's program: the standard library only, nothing heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from gpudiag.layout.events import Event


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
    """Where a traced Session.run really ran each node (RunMetadata step stats)."""

    KIND = "step_stats"
    group: str = "?"
    call: int | None = None  # which run of its fetch group (from 0)
    devices: dict[str, dict[str, Any]] = field(default_factory=dict)  # device -> nodes,
    # busy_us, scopes, op_types
    pinned: list[dict[str, Any]] = field(default_factory=list)  # requested, actual, nodes,
    # examples, scopes
    node_devices: dict[str, str] = field(default_factory=dict)  # node -> device it ran on


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


#: The step kinds, each with its row's record.
STEPS: dict[str, tuple[type[Event], type]] = {
    k.KIND: (k, row) for k, row in ((FitSteps, FitRow), (FunctionSteps, FunctionRow),
                                    (SessionSteps, SessionRow), (EagerSteps, FunctionRow))}


def steps_event(kind: str, rows: list[dict[str, Any]], loop: dict[str, Any]) -> Event:
    """A step buffer's rows (plain dicts, built per step) as the ``kind`` event."""
    event_cls, row_cls = STEPS[kind]
    names = {f.name for f in fields(row_cls)}
    return event_cls(rows=tuple(row_cls(**{k: v for k, v in r.items() if k in names})
                                for r in rows), **loop)  # type: ignore[call-arg]
