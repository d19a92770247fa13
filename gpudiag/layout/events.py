"""The event protocol between the program and gpudiag: children/program/events-<pid>.jsonl.

What the in-program agent (gpudiag.inprogram) records, one event a line, each a JSON
object: the header ``{"kind": KIND, "v": PROTOCOL_VERSION, "t": <Unix s>, "pid": <pid>,
"seq": <n in its process>}`` and the fields of the event's record, under the same
names (``class_name`` is written ``class``: the one name Python forbids). Every event the
agent writes is one of the frozen records, written by :func:`encode`. This module holds
the protocol and the kinds of the program's setup and surroundings (the process,
TensorFlow's import, devices, strategies and clusters, placement, tf.data calls, logs,
warnings, crashes, the agent's own errors); layout/loopevents.py the kinds of its training
loops (their steps, step functions, sessions, stalls, input); layout/eventdecode.py reads
a line back.

Units are in the names (``_s`` seconds, ``_unix_s`` wall-clock Unix seconds, ``_bytes``);
``caller`` and frame dicts are ``{file, line, function[, code]}`` in the program.
Imported inside the user's program: the standard library only, nothing heavy.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

PROTOCOL_VERSION = 1  # lines without "v" (gpudiag before the protocol) read as version 1
HEADER = ("kind", "v", "t", "pid", "seq")
WIRE_NAMES = {"class_name": "class"}  # attribute -> JSON name, where Python forbids the name


@dataclass(frozen=True)
class Event:
    """One event the agent records (the base of every kind). A kind registers itself by
    its name on the line in :data:`KINDS` (read back by gpudiag.layout.eventdecode)."""

    KIND: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.KIND:
            KINDS[cls.KIND] = cls


#: Every kind gpudiag reads, by its name on the line: each Event subclass with a KIND,
#: this module's and gpudiag.layout.loopevents'.
KINDS: dict[str, type[Event]] = {}


def caller_at(caller: dict[str, Any] | None) -> str:
    """``file:line`` of the program's frame (``?``: not known)."""
    return f"{caller['file'].rsplit('/', 1)[-1]}:{caller['line']}" if caller else "?"


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
    """One tf.config (or tf.debugging / tf.compat.v1) configuration call, in order; or
    Keras's ``mixed_precision.set_global_policy`` (order 0, the policy's name its arg)."""

    KIND = "config_call"
    api: str = ""  # tf.config.experimental.set_memory_growth ...
    order: int = 0
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    initialized_before: bool | None = None  # were the devices initialised when it was called?
    caller: dict[str, Any] | None = None  # file, line, function in the program
    error_type: str | None = None
    error: str | None = None


@dataclass(frozen=True)
class DebugMode(Event):
    """A debugging switch the program turned on or off: ``tf.config.run_functions_eagerly``,
    ``tf.data.experimental.enable_debug_mode``, ``tf.debugging.enable_check_numerics`` /
    ``disable_check_numerics``. Each makes every step slower while it is on."""

    KIND = "debug_mode"
    api: str = ""  # tf.config.run_functions_eagerly ...
    enabled: bool = False  # what the call set: True turned the mode on
    caller: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        return caller_at(self.caller)


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
class ClusterJoinEnded(Event):
    """How the latest join by ``via`` ended: the call returned (joined) or raised (failed)."""

    KIND = "cluster_join_ended"
    via: str = "?"
    outcome: str = "joined"  # joined | failed


@dataclass(frozen=True)
class PlacementLogAsked(Event):
    """gpudiag asked TensorFlow for its placement log (a cluster task)."""

    KIND = "placement_log_asked"
    reason: str = ""


@dataclass(frozen=True)
class Weights(Event):
    KIND = "weights"
    source: str = ""
    phase: str = ""
    calls: int = 0
    fingerprint: list[list[float]] | None = None


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
class DatasetCall(Event):
    """One tf.data call the program made (gpudiag.inprogram.datasets), at pipeline build time."""

    KIND = "dataset_call"
    method: str = "?"  # map, prefetch, cache, interleave, batch, ..., from_generator ...
    args: dict[str, Any] = field(default_factory=dict)  # num_parallel_calls ("AUTOTUNE" for
    # -1), buffer_size, batch_size ...
    function: dict[str, Any] | None = None  # the function given: name, file, line, user
    input: int | None = None  # the dataset it was called on (its tag), None: a source or unknown
    output: int | None = None  # the dataset it made
    caller: dict[str, Any] | None = None  # the program's frame: file, line, function, code
    # the made dataset's element shapes (``(<unknown>, ())``), where this call made them
    # less known than its input's (a map through tf.py_function or tf.numpy_function, a
    # from_generator without shapes): None where it did not
    shape_lost: str | None = None

    @property
    def where(self) -> str:
        return caller_at(self.caller)


@dataclass(frozen=True)
class Crash(Event):
    KIND = "crash"
    type: str = "?"
    module: str = ""  # the exception class's module
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
    first_step: int | None = None  # the step the window opened at
    steps: list[int] = field(default_factory=list)
    error: str | None = None  # skipped or failed: why


@dataclass(frozen=True)
class TfLog(Event):
    KIND = "tf_log"
    logger: str = ""  # the Python logger's name (tensorflow, absl ...)
    level: str = ""
    message: str = ""
    source: str = ""  # file:line
    shown: bool = False  # did the program's own logger level let the user see it?


@dataclass(frozen=True)
class DeviceScope(Event):
    """A ``tf.device`` scope the program opened eagerly (gpudiag.inprogram.devicescopes)."""

    KIND = "device_scope"
    device: str = ""  # as the program wrote it: /device:GPU:2, /GPU:0 ...
    caller: dict[str, Any] | None = None  # file, line, function


@dataclass(frozen=True)
class PyWarning(Event):
    """A Python warning TensorFlow, Keras or tf_keras showed (gpudiag.inprogram.pywarnings)."""

    KIND = "py_warning"
    category: str = "Warning"  # UserWarning ...
    message: str = ""
    file: str = ""  # where the library attributed it
    line: int = 0
    user_frame: dict[str, Any] | None = None  # the program's innermost frame when shown

    @property
    def text(self) -> str:
        """As Python prints it: ``UserWarning: message``."""
        return f"{self.category}: {self.message}"


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

    @property
    def where(self) -> str:
        return caller_at(self.caller)


@dataclass(frozen=True)
class Unknown(Event):
    """A line this gpudiag cannot read as one of its kinds: another kind, or a newer
    protocol version. Kept whole, never an error."""

    kind: str = ""
    version: int = 0
    fields: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Recorded:
    """One decoded line: the header and the event."""

    pid: int
    seq: int
    t_unix_s: float | None
    event: Event


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
        out[WIRE_NAMES.get(f.name, f.name)] = value
    return out


def encode(event: Event, *, t_unix_s: float, pid: int, seq: int) -> str:
    """One JSON line (without its newline)."""
    header = {"kind": event.KIND, "v": PROTOCOL_VERSION, "t": t_unix_s, "pid": pid, "seq": seq}
    return json.dumps({**header, **wire(event)}, default=_plain)
