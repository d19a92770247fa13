"""Read a profiler trace (``*.xplane.pb``) into per-device busy time, input waits, top ops.

The trace is what ``tf.profiler.experimental.start/stop`` (or Keras's ``profile_batch``)
writes under ``<logdir>/plugins/profile/<timestamp>/<host>.xplane.pb``, the file
TensorBoard's Profile tab shows. It is read with xprof's converter library
(``xprof.profile_data.ProfileData``, the C++ XSpace reader TensorBoard's profile plugin
uses), without TensorFlow.

What is taken from it:

- the window: from the first to the last step marker
  (STEP_MARKERS: ``tf.profiler.experimental.Trace("train", step_num=...)``, Keras 3's
  ``Profiled batch``), or
  the span of all op events when there are none;
- per GPU, from its device plane (``/device:GPU:<i>``): busy time as the union of the
  kernel intervals on its ``Stream #...`` lines (copies, ``Memcpy...``, are not kernels);
  every GPU plane is listed, one that ran no kernel with 0 (on the public 8-GPU trace in
  tests/data, 6 of 8); this is the driver's view, exact;
- per CPU device, from the TensorFlow op events on the host plane (``/host:CPU``, lines
  ``tf_Compute/...`` etc., event names ``<op name>:<op type>``): each op is attributed to
  the device TensorFlow placed it on, looked up by its node name in ``op_devices`` (the
  placement evidence: the placement log's rows for `gpudiag run`, the step graph's
  assigned devices for `scaling`); the names of ops run inside a function call carry the
  call's prefix (``StatefulPartitionedCall/``), which is tried with and without. Never by
  a name scope: a ``tower_1/`` op that soft placement moved to CPU:0 counts on CPU:0. Ops
  with no placement are counted as unattributed. With virtual CPU devices this is the
  only per-device evidence; on GPUs the host events are kernel launches, so the device
  planes are the ones to trust;
- input waits: the ops that hand a batch to the step (op types with ``GetNext``, and
  tf.data's asynchronous ``...GetNext...Op::DoCompute`` kernels);
- communication: collective and NCCL ops and the ``average_gradients/`` scope;
- the top ops by total time: from the GPU planes' derived ``TensorFlow Ops`` line where
  there is one (on a GPU the host's op events are launches), else from the host's.

The GPU-plane part follows the XPlane layout TensorFlow's GPU tracer writes, checked on
the public 8-GPU V100 trace in tests/data (nothing on this machine has a GPU).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HOST_PLANE_PREFIX = "/host:CPU"
GPU_PLANE_RE = re.compile(r"^/device:GPU:(\d+)$")
STREAM_LINE_PREFIX = "Stream"
OP_EVENT_RE = re.compile(r"^(?P<name>[^:\s][^:]*):(?P<type>[A-Za-z_][\w]*)$")
CALL_PREFIX_RE = re.compile(r"^(?:Stateful)?PartitionedCall(?:_\d+)?/")
# Host step markers: tf.profiler.experimental.Trace("train", step_num=...) is gpudiag's
# own (layout.PROFILER_STEP_MARKER) and what tf.keras's fit wraps each step in from
# TensorFlow 2.4 on (tf_keras too); Keras 3's TensorBoard(profile_batch=...) callback marks
# each profiled step "Profiled batch" (keras/src/backend/tensorflow/tensorboard.py);
# "TraceContext" (graph_type "train", or "test" for evaluate's steps) is tf.keras's of
# TensorFlow 2.2-2.3.
STEP_MARKERS = frozenset({"train", "Profiled batch", "TraceContext"})
INPUT_OP_MARK = "GetNext"
# tf.data's get-next kernels are asynchronous; their run shows as "<Kernel>::DoCompute"
# on the tf_data_iterator_get_next threads (IteratorGetNextOp::DoCompute ...).
INPUT_KERNEL_RE = re.compile(r"^\w*GetNext\w*Op::DoCompute$")
COMM_OP_TYPES = frozenset({
    "CollectiveReduceV2", "CollectiveReduce", "CollectiveReduceV3", "CollectiveGatherV2",
    "CollectiveBcastSendV2", "CollectiveBcastRecvV2", "NcclAllReduce", "NcclReduce",
    "NcclBroadcast", "_NcclReduceSend", "_NcclReduceRecv", "_NcclBroadcastSend",
    "_NcclBroadcastRecv",
})
COMM_SCOPE = "average_gradients/"
COPY_PREFIX = "Memcpy"  # MemcpyH2D / MemcpyD2H / MemcpyD2D / MemcpyP2P on a stream
DEVICE_OPS_LINE = "TensorFlow Ops"  # a GPU plane's derived line: op time on the device
TOP_OPS = 10


class TraceError(Exception):
    """The trace could not be read (missing file, not an XSpace, xprof unavailable)."""


@dataclass(frozen=True)
class DeviceBusy:
    """Work seen on one compute device during the trace window."""

    device: str  # the compute device, e.g. /device:GPU:1 or /device:CPU:2
    source: str  # "device-plane" (kernels on GPU streams) or "placement" (host op events
    # attributed by where TensorFlow placed each op)
    busy_s: float  # union of its event intervals
    event_count: int
    busy_fraction: float  # busy_s / window_s


@dataclass(frozen=True)
class NamedTime:
    """An op type's or a kernel's total time in the profiled steps, and its count."""

    name: str
    total_s: float
    count: int


@dataclass(frozen=True)
class TraceSummary:
    path: str
    planes: list[str]
    step_markers: int
    window_s: float
    devices: list[DeviceBusy]
    input_wait_s: float  # union of batch hand-over ops (IteratorGetNext ...)
    input_wait_fraction: float
    communication_s: float  # union of collective/NCCL ops and gradient averaging
    communication_fraction: float
    top_ops: list[NamedTime] = field(default_factory=list)
    unattributed_s: float = 0.0  # host op time of ops with no known placement

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def attributed(self) -> bool:
        """Whether any work of the window was tied to a device: a device plane, or an op
        whose placement is known."""
        return any(d.source == "device-plane" or d.event_count for d in self.devices)

    def busy_by_device(self) -> dict[str, float]:
        """Busy seconds per compute device: device planes where there are any."""
        planes = {d.device: d.busy_s for d in self.devices if d.source == "device-plane"}
        if planes:
            return planes
        return {d.device: d.busy_s for d in self.devices}


def find_xplanes(logdir: Path) -> list[Path]:
    """Every ``*.xplane.pb`` under ``logdir`` (any depth), oldest profile first."""
    return sorted(logdir.rglob("*.xplane.pb"))


def union_s(intervals: Iterable[tuple[float, float]]) -> float:
    """Total length, in seconds, of the union of (start_ns, end_ns) intervals."""
    total_ns = 0.0
    cur_start = cur_end = None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None and cur_start is not None:
                total_ns += cur_end - cur_start
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None and cur_start is not None:
        total_ns += cur_end - cur_start
    return total_ns / 1e9


@dataclass(frozen=True)
class Event:
    """One trace event as plain data: which plane and line, name, start and end (ns)."""

    plane: str
    line: str
    name: str
    start_ns: float
    end_ns: float


def read_events(path: Path) -> tuple[list[str], list[Event]]:
    """All events of an xplane.pb file, through xprof's reader."""
    if not path.is_file():
        raise TraceError(f"no trace file at {path}")
    try:
        from xprof.profile_data import ProfileData
    except ImportError as exc:  # tensorboard-plugin-profile / xprof older than 2.2x
        raise TraceError(f"xprof's trace reader is not importable: {exc}") from exc
    try:
        data = ProfileData.from_file(str(path))
    except Exception as exc:  # the C reader raises plain RuntimeError/ValueError
        raise TraceError(f"{path} is not a readable XSpace trace: {exc}") from exc
    planes: list[str] = []
    events: list[Event] = []
    with data:
        for plane in data.planes:
            planes.append(plane.name)
            for line in plane.lines:
                for ev in line.events:
                    start = float(ev.start_ns)
                    events.append(Event(plane.name, line.name, ev.name, start,
                                        start + float(ev.duration_ns)))
    return planes, events


def summarize(path: Path, op_devices: Mapping[str, str] | None = None,
              devices: Sequence[str] = ()) -> TraceSummary:
    """Summarise one trace. ``op_devices``: node name -> the device TensorFlow placed it
    on; ``devices``: compute devices to list even when they did nothing."""
    planes, events = read_events(path)
    return summarize_events(str(path), planes, events, op_devices, devices)


def device_of(name: str, op_devices: Mapping[str, str]) -> str | None:
    """The device of a trace op by its node name: as it is, without the prefixes of the
    function calls it was inlined from, or else that of the nearest enclosing node with a
    placement (an op inlined from a function call runs where the call was placed)."""
    candidate = name
    while True:
        device = op_devices.get(candidate)
        if device is not None:
            return device
        stripped = CALL_PREFIX_RE.sub("", candidate, count=1)
        if stripped == candidate:
            break
        candidate = stripped
    parts = name.split("/")
    for end in range(len(parts) - 1, 0, -1):
        device = op_devices.get("/".join(parts[:end]))
        if device is not None:
            return device
    return None


@dataclass(frozen=True)
class _HostOps:
    """The host plane's step markers, TensorFlow op events (event, name, type) and tf.data
    get-next kernels."""

    markers: list[Event]
    ops: list[tuple[Event, str, str]]
    input_kernels: list[Event]


def _host_ops(events: Sequence[Event]) -> _HostOps:
    markers, ops, kernels = [], [], []
    for e in events:
        if not e.plane.startswith(HOST_PLANE_PREFIX):
            continue
        if e.name in STEP_MARKERS:
            markers.append(e)
        m = OP_EVENT_RE.match(e.name)
        if m:
            ops.append((e, m.group("name"), m.group("type")))
        elif INPUT_KERNEL_RE.match(e.name):
            kernels.append(e)
    return _HostOps(markers, ops, kernels)


@dataclass(frozen=True)
class _Window:
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, (self.end - self.start) / 1e9)

    def holds(self, e: Event) -> bool:
        return self.seconds == 0 or (e.end_ns >= self.start and e.start_ns <= self.end)

    def fraction(self, seconds: float) -> float:
        return seconds / self.seconds if self.seconds > 0 else 0.0


def _window(host: _HostOps) -> _Window:
    spans = host.markers or [e for e, _, _ in host.ops]
    if not spans:
        return _Window(0.0, 0.0)
    return _Window(min(e.start_ns for e in spans), max(e.end_ns for e in spans))


def _gpu_busy(planes: list[str], events: Sequence[Event], w: _Window
              ) -> tuple[list[DeviceBusy], dict[str, list[float]]]:
    """Every GPU plane's kernel busy time (copies are not kernels; one that ran no kernel
    is listed with 0) and the op totals of their TensorFlow Ops lines."""
    by_gpu: dict[int, list[tuple[float, float]]] = {
        int(g.group(1)): [] for name in planes if (g := GPU_PLANE_RE.match(name))}
    device_ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in events:
        g = GPU_PLANE_RE.match(e.plane)
        if not g or not w.holds(e):
            continue
        if e.line.startswith(STREAM_LINE_PREFIX) and not e.name.startswith(COPY_PREFIX):
            by_gpu.setdefault(int(g.group(1)), []).append((e.start_ns, e.end_ns))
        elif e.line == DEVICE_OPS_LINE and (m := OP_EVENT_RE.match(e.name)):
            device_ops[m.group("type")][0] += (e.end_ns - e.start_ns) / 1e9
            device_ops[m.group("type")][1] += 1
    found = []
    for index in sorted(by_gpu):
        busy = union_s(by_gpu[index])
        found.append(DeviceBusy(f"/device:GPU:{index}", "device-plane", busy,
                                len(by_gpu[index]), w.fraction(busy)))
    return found, device_ops


@dataclass
class _Placed:
    by_device: dict[str, list[tuple[float, float]]] = field(
        default_factory=lambda: defaultdict(list))
    unattributed: list[tuple[float, float]] = field(default_factory=list)
    inputs: list[tuple[float, float]] = field(default_factory=list)
    comm: list[tuple[float, float]] = field(default_factory=list)
    totals: dict[str, list[float]] = field(default_factory=lambda: defaultdict(lambda: [0.0, 0]))


def _placed(host: _HostOps, w: _Window, op_devices: Mapping[str, str] | None) -> _Placed:
    """Host op events attributed to the device each op was placed on."""
    out = _Placed()
    for e, name, op_type in host.ops:
        if not w.holds(e):
            continue
        span = (e.start_ns, e.end_ns)
        placed = device_of(name, op_devices) if op_devices else None
        (out.by_device[placed] if placed is not None else out.unattributed).append(span)
        if INPUT_OP_MARK in op_type:
            out.inputs.append(span)
        if op_type in COMM_OP_TYPES or COMM_SCOPE in name:
            out.comm.append(span)
        if not op_type.startswith("_"):  # skip _Send/_Recv bookkeeping in the top list
            out.totals[op_type][0] += (e.end_ns - e.start_ns) / 1e9
            out.totals[op_type][1] += 1
    out.inputs += [(e.start_ns, e.end_ns) for e in host.input_kernels if w.holds(e)]
    return out


def summarize_events(
    path: str, planes: list[str], events: Sequence[Event],
    op_devices: Mapping[str, str] | None = None, devices: Sequence[str] = (),
) -> TraceSummary:
    """The pure part of ``summarize``: plain events in, a TraceSummary out."""
    host = _host_ops(events)
    w = _window(host)
    found, device_ops = _gpu_busy(planes, events, w)
    placed = _placed(host, w, op_devices)
    for device in sorted(set(placed.by_device) | set(devices)):
        spans = placed.by_device.get(device, [])
        busy = union_s(spans)
        found.append(DeviceBusy(device, "placement", busy, len(spans), w.fraction(busy)))
    # On GPUs the op time is on the device planes (their "TensorFlow Ops" line); the host's
    # op events there are launches.
    ranked = device_ops or placed.totals
    top = sorted((NamedTime(k, v[0], int(v[1])) for k, v in ranked.items()),
                 key=lambda o: -o.total_s)[:TOP_OPS]
    input_s, comm_s = union_s(placed.inputs), union_s(placed.comm)
    return TraceSummary(
        path=path, planes=planes, step_markers=len(host.markers), window_s=w.seconds,
        devices=found, input_wait_s=input_s, input_wait_fraction=w.fraction(input_s),
        communication_s=comm_s, communication_fraction=w.fraction(comm_s), top_ops=top,
        unattributed_s=union_s(placed.unattributed),
    )
