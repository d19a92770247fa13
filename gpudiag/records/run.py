"""Typed records of what the hooks saw in one process of the program (parent side).

Built from the events files (gpudiag.layout.events) by gpudiag.run.events; read by the verdicts
(gpudiag.verdicts.run.process). The events kept as the program's agent wrote them (its
configuration calls, tf.data calls, device scopes, warnings, TensorFlow's log records, a
crash, the profile window, TF1 constructs, Session step stats) are the protocol's own
records (gpudiag.layout.events, loopevents): one shape from the wire to the verdicts.
Plain frozen dataclasses, no TensorFlow. Times are seconds (``_s``), wall-clock times are
Unix seconds (``t_unix_s``); devices are in the short form ``/device:GPU:1``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.records.callsites import HostReadSite, KerasCallSite


@dataclass(frozen=True)
class DeviceSnapshot:
    reason: str  # what made gpudiag look: strategy, fit, step function, session, exit
    physical: list[str]  # /physical_device:GPU:0 ...
    logical: list[str]  # /device:GPU:0 ...
    gpus: list[dict[str, Any]]  # per physical GPU: details, memory_growth, logical config
    soft_placement: bool | None
    cuda_build: bool | None
    remote: list[str] = field(default_factory=list)  # other tasks' devices of its cluster
    env: dict[str, str | None] = field(default_factory=dict)  # CUDA_VISIBLE_DEVICES ... then


@dataclass(frozen=True)
class StrategyRecord:
    class_name: str
    num_replicas: int | None
    worker_devices: list[str]
    parameter_devices: list[str]
    cross_device_ops: str | None
    implementation: str | None  # RING / NCCL / AUTO for collectives
    nccl: bool
    cluster: dict[str, Any] | None
    caller: dict[str, Any] | None
    module: str = ""  # the strategy class's module


@dataclass(frozen=True)
class ClusterJoin:
    """The process joining a cluster: a multi-worker strategy, a parameter-server
    strategy's coordinator or a tf.distribute.Server (gpudiag.inprogram.strategies)."""

    via: str  # MultiWorkerMirroredStrategy | ParameterServerStrategy | tf.distribute.Server
    task_type: str | None
    task_id: int | None
    cluster_spec: dict[str, list[str]] | None  # {job: [address, ...]}
    outcome: str = "waiting"  # waiting (never returned) | joined | failed (its exception
    # is the program's crash)
    caller: dict[str, Any] | None = None  # the program's line that joined


@dataclass(frozen=True)
class Step:
    index: int
    start_unix_s: float | None
    duration_s: float | None  # the step call's own wall time (fit: batch begin to end)
    loss: float | None
    metrics: dict[str, float] = field(default_factory=dict)
    traced: bool = False  # a FULL_TRACE Session.run: slower, left out of the timing
    epoch: int | None = None  # Keras fit: the epoch of this batch
    count: int = 1  # steps this row stands for (rows aggregated past the first 20,000)
    per_call: int = 1  # training steps one call ran (Keras fit's steps_per_execution)
    tracing: bool = False  # a step function's call that traced it (built a new graph)
    wait_s: float | None = None  # the program's next(iterator) seconds in this step's period


@dataclass(frozen=True)
class StepSeries:
    """One source of training steps: Model.fit, a tf.function of the program, a Session.run
    group, an eager step (``tape.gradient`` outside any tf.function)."""

    kind: str  # "fit" | "function" | "session" | "eager"
    label: str
    steps: list[Step]
    batch_size: int | None = None  # examples per step, when known (Keras fit)
    num_classes: int | None = None  # the model's output width (Keras fit)
    facts: dict[str, Any] = field(default_factory=dict)
    epochs: list[dict[str, float]] = field(default_factory=list)  # per-epoch logs (fit)


@dataclass(frozen=True)
class WeightsRecord:
    source: str
    first: list[list[float]] | None
    last: list[list[float]] | None
    first_phase: str
    last_phase: str
    calls_between: int

    @property
    def moved(self) -> bool | None:
        if self.first is None or self.last is None or self.first_phase == self.last_phase:
            return None
        return self.first != self.last


@dataclass(frozen=True)
class FunctionGraph:
    function: str  # the program's function (qualified name)
    name: str  # the concrete function's name in the placement log (__inference_...)
    ops: int
    pinned: list[tuple[str, str, str]]  # (node, op type, requested device)


EACH, FIRST, LATEST = "each", "first", "latest"


def kept(kind: type[ev.Event], rule: str) -> Any:
    """A field that holds one kind of the agent's events as the agent wrote them, and
    declares it: each one in order (EACH), the first (FIRST) or the latest (LATEST).
    gpudiag.run.events lands the kind here from this declaration alone."""
    meta = {"kept": (kind, rule)}
    return field(default_factory=list, metadata=meta) if rule == EACH else \
        field(default=None, metadata=meta)


@dataclass(frozen=True)
class ProcessObservation:
    """Everything the hooks recorded in one Python process of the program."""

    pid: int
    ppid: int | None
    argv: list[str]
    start_env: dict[str, str | None]
    tf_version: str | None = None
    keras_version: str | None = None
    cpp_log_level: str | None = None
    cpp_log_level_overridden: bool = False
    placement_log: bool = False  # gpudiag's placement window was set up in this process
    # the placement window's exports: {"eager": bool, "nodes": [[name, op, device] ...]}
    placed_graphs: list[dict[str, Any]] = field(default_factory=list)
    # stall events (gpudiag.inprogram.stallwatch; gpudiag.layout.loopevents.Stall's fields),
    # each with ``ended_after_s`` once steps came
    stalls: list[dict[str, Any]] = field(default_factory=list)
    # gpudiag's placement windows: {window, opened_by, closed_by, graphs, nodes_left_out}
    placement_windows: list[dict[str, Any]] = field(default_factory=list)
    placement_log_asked: str | None = None  # why gpudiag asked for TensorFlow's placement log
    config_calls: list[ev.ConfigCall] = kept(ev.ConfigCall, EACH)
    debug_modes: list[ev.DebugMode] = kept(ev.DebugMode, EACH)  # switched on and off
    devices: DeviceSnapshot | None = None
    strategies: list[StrategyRecord] = field(default_factory=list)
    cluster_joins: list[ClusterJoin] = field(default_factory=list)
    series: list[StepSeries] = field(default_factory=list)
    weights: list[WeightsRecord] = field(default_factory=list)
    graphs: list[FunctionGraph] = field(default_factory=list)
    sessions: list[dict[str, Any]] = field(default_factory=list)  # config summaries
    session_calls: list[dict[str, Any]] = field(default_factory=list)  # {target, caller} each
    step_stats: list[lev.StepStats] = kept(lev.StepStats, EACH)
    dataset_calls: list[ev.DatasetCall] = kept(ev.DatasetCall, EACH)
    crash: ev.Crash | None = kept(ev.Crash, FIRST)
    profile: ev.Profile | None = kept(ev.Profile, LATEST)
    tf_logs: list[ev.TfLog] = kept(ev.TfLog, EACH)
    py_warnings: list[ev.PyWarning] = kept(ev.PyWarning, EACH)
    device_scopes: list[ev.DeviceScope] = kept(ev.DeviceScope, EACH)
    hook_errors: list[dict[str, Any]] = field(default_factory=list)  # with hook_note's
    hook_errors_counted: int | None = None  # at its exit, those past the written 50 included
    stream_errors_counted: int | None = None  # the program's own streams raising at its exit
    exited: bool = False  # its exit handler ran (not killed, not a fatal signal)
    first_t_unix_s: float | None = None  # its first and last event
    last_t_unix_s: float | None = None
    faults: str = ""  # faulthandler's output (a fatal signal's Python stack)
    events: int = 0
    # what the process was: sys.executable, its Python version, working directory
    executable: str | None = None
    python_version: str | None = None
    cwd: str | None = None
    keras_module: str | None = None  # keras or tf_keras
    tf_initialized_at_import: bool | None = None  # TensorFlow's devices already set up
    tf_import_caller: dict[str, Any] | None = None  # the program's line importing it
    modules_before_tf: list[str] = field(default_factory=list)  # keras, jax ... already there
    unknown_events: list[str] = field(default_factory=list)  # kinds this gpudiag cannot read
    tf1_calls: list[ev.Tf1Distribution] = kept(ev.Tf1Distribution, EACH)  # TF1 constructs
    keras_calls: list[KerasCallSite] = field(default_factory=list)  # per call site
    first_keras_call_t_unix_s: float | None = None  # when the first of them started
    keras_calls_left_out: int = 0  # calls at sites past the hook's bound on sites
    # (Keras calls so far, the process's resident bytes) after every so many of them
    rss_after_calls: list[tuple[int, int]] = field(default_factory=list)
    host_reads: list[HostReadSite] = field(default_factory=list)  # per line, the most first
    host_reads_left_out: int = 0  # reads at lines past the hook's bound on lines

    @property
    def imported_tf(self) -> bool:
        return self.tf_version is not None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class TaskReport:
    """One task of a multi-worker or parameter-server cluster as one `gpudiag run` saw it:
    a process of the program that joined the cluster (or had a TF_CONFIG naming its task).
    Written into the logdir (layout.run_cluster_dir) so that runs sharing a logdir are
    reported together; read back by gpudiag.run.tasks, judged by
    gpudiag.verdicts.run.cluster."""

    task_type: str
    task_id: int
    cluster_key: str  # a digest of the cluster spec: the same cluster, the same key
    cluster_spec: dict[str, list[str]]
    via: str  # MultiWorkerMirroredStrategy | ParameterServerStrategy | tf.distribute.Server
    # | TF_CONFIG (the process never joined: only its environment names the task)
    joined: str  # joined | waiting (still blocked joining when it ended) | failed | never
    host: str
    pid: int
    run_dir: str  # the `gpudiag run` that saw it
    started_unix_s: float | None
    ended_unix_s: float | None
    exited: bool  # its exit handler ran: it ended normally (or by an exception)
    interrupted: bool  # the `gpudiag run` was stopped (Ctrl-C, SIGTERM, SIGHUP)
    returncode: int | None  # when this process was the program itself (else unknown)
    loop: str | None = None  # the training loop with the most steps
    steps: int = 0
    step_s_median: float | None = None
    examples_per_s: float | None = None
    first_loss: float | None = None
    last_loss: float | None = None
    crash: str | None = None  # ``Type: first line of the message`` or a fatal signal
    stragglers: list[str] = field(default_factory=list)  # tasks TensorFlow waited for
    lost_peers: list[str] = field(default_factory=list)  # tasks TensorFlow declared lost
    # NVML on its machine during the run: the GPUs NVML saw this process on, or every GPU
    # of the machine when NVML does not list processes ({index, name, util_p95_percent,
    # peak_memory_used_bytes, this_process}); None without NVML
    gpus: list[dict[str, Any]] | None = None
    # several tasks of the cluster served by this one process (the tutorial's in-process
    # cluster: tf.distribute.Server for each worker and ps, the coordinator beside them)
    in_process: bool = False
    # {task: {device: ops}} TensorFlow's placement log in this task's run placed on each
    # task of the cluster (readers.clusterplacement); the same for every task of one run
    ops_by_task: dict[str, dict[str, int]] = field(default_factory=dict)
    variables_by_task: dict[str, int] = field(default_factory=dict)  # likewise: VarHandleOps
    sessions: int = 0  # tf.compat.v1 Sessions its process created (TF1 between-graph)
    sync_replicas: bool = False  # its log placed tf.train.SyncReplicasOptimizer's queues
    # the tasks TensorFlow's master was "still waiting for response from" when it ended
    # (CreateSession could not reach them), and how many times it said so
    waiting_for: list[str] = field(default_factory=list)
    waiting_lines: int = 0
    last_step_end_unix_s: float | None = None  # when its longest loop's last step ended
    # the global step its loop observed last (TF1: the graph's global_step its Session runs
    # fetched; Keras fit: optimizer.iterations when fit ended), None when none was seen
    global_step: int | None = None
    # the TF1 distribution constructs its process built (gpudiag.verdicts.run.tf1: one
    # {api, where, ...args} each, compute/apply_gradients left out), [] when none was seen
    tf1: list[dict[str, Any]] = field(default_factory=list)

    @property
    def task(self) -> str:
        """``worker-1``: how gpudiag names a task everywhere (cluster.tfconfig, messages)."""
        return f"{self.task_type}-{self.task_id}"

    def to_dict(self) -> dict[str, Any]:
        return {"task": self.task, **asdict(self)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TaskReport:
        names = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in names})
