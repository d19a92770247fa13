"""Where each step's time goes, per device, from a profiler trace (``*.xplane.pb``).

No TensorFlow: the events come from xprof's XSpace reader (gpudiag.readers.traces.read_events),
and xprof's own input-pipeline analysis (``input_pipeline_analyzer``, what TensorBoard's
Profile tab shows) is taken as it is, beside, in :class:`XprofView`.

The steps (gpudiag.readers.stepwindows): the host's step markers, each step from its
start to the next step's start, so the time between the calls (the Python loop, an eager
``next(iterator)``) is part of it; where a trace has no host marker, the device planes'
derived ``Steps`` line, the step call ending where the host's tf.function call in it ends;
else the whole trace as one step.

Each step of each device is split, every nanosecond counted once, in this order:

- compute: on a GPU the kernels on its ``Stream`` lines (copies and NCCL kernels apart);
  on the CPU the TensorFlow op events of the executor threads placed on that device
  (gpudiag.readers.traces.device_of), tf.data's own threads left out; ops the placement does
  not name get a row of their own, ``/host:CPU``, so their time is idle on the devices;
- communication: collective and NCCL ops and kernels, device-to-device / peer copies;
- copy (a GPU): host-to-device and device-to-host copies (``MemcpyH2D``/``MemcpyD2H``),
  their own part: data transfer is not the input pipeline;
- input: the time the step blocked on tf.data (``IteratorGetNext...`` ops, the get-next
  kernels' ``DoCompute`` on the host);
- host: time outside the step call (the program's Python between steps) and, inside it,
  time when no op of any device ran (on the CPU: framework overhead; on a GPU: the device
  had no kernel while no other GPU worked, so it waited for the host to launch or dispatch
  work: launch overhead);
- idle: the rest (this device waited while another device or thread worked).

A GPU's kernels are described beside the parts (gpudiag.readers.gpukernels: kernels per
step, median and mean time, gaps, top kernels and ops, half-precision and Tensor Core
shares). Where the breakdown cannot say something it says why in ``notes`` (no host step
marker; a CPU trace without the placement the run recorded: one host row). The records it
returns are gpudiag.readers.steprecords'.
"""

from __future__ import annotations

import bisect
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from gpudiag.readers import intervals as iv
from gpudiag.readers.gpukernels import kernel_stats
from gpudiag.readers.steprecords import HOST_ROW, Breakdown, DeviceBreakdown, StepParts
from gpudiag.readers.stepwindows import Window, find_windows
from gpudiag.readers.traces import (
    COMM_OP_TYPES,
    COMM_SCOPE,
    DEVICE_OPS_LINE,
    GPU_PLANE_RE,
    HOST_PLANE_PREFIX,
    INPUT_KERNEL_RE,
    INPUT_OP_MARK,
    OP_EVENT_RE,
    STREAM_LINE_PREFIX,
    Event,
    TraceError,
    device_of,
    read_events,
)
from gpudiag.readers.xprofview import xprof_view

TF_DATA_LINE_PREFIX = "tf_data"
NCCL_MARK = "nccl"
PYTHON_OP_TYPES = frozenset({"PyFunc", "PyFuncStateless", "EagerPyFunc"})
UPDATE_OP_TYPES = frozenset({"AssignSubVariableOp", "AssignAddVariableOp"})
LOOP_BACKWARD_RE = re.compile(r"(?:^|/)while(?:_\d+)?/body/.*(?:gradient_tape|gradients)/")


def _gpu_index(name: str) -> int | None:
    """The index of a GPU plane (/device:GPU:3) or device name (.../device:GPU:3)."""
    m = GPU_PLANE_RE.match(name) or re.search(r"/device:GPU:(\d+)$", name)
    return int(m.group(1)) if m else None


def _is_op(e: Event) -> bool:
    return e.plane.startswith(HOST_PLANE_PREFIX) and \
        not e.line.startswith(TF_DATA_LINE_PREFIX) and OP_EVENT_RE.match(e.name) is not None


def _is_stream(e: Event) -> bool:
    return GPU_PLANE_RE.match(e.plane) is not None and e.line.startswith(STREAM_LINE_PREFIX)


def _is_input_op(e: Event) -> bool:
    m = OP_EVENT_RE.match(e.name)
    return (m is not None and INPUT_OP_MARK in m.group("type")) or \
        (e.plane.startswith(HOST_PLANE_PREFIX) and INPUT_KERNEL_RE.match(e.name) is not None)


def _is_python_op(e: Event) -> bool:
    """The program's own Python run by TensorFlow (Dataset.from_generator's generator,
    tf.py_function, tf.numpy_function), on any host thread."""
    m = OP_EVENT_RE.match(e.name)
    return m is not None and m.group("type") in PYTHON_OP_TYPES and \
        e.plane.startswith(HOST_PLANE_PREFIX)


def _is_comm_op(e: Event) -> bool:
    m = OP_EVENT_RE.match(e.name)
    return m is not None and (m.group("type") in COMM_OP_TYPES or COMM_SCOPE in m.group("name"))


@dataclass(frozen=True)
class _Sets:
    """One device's interval sets, merged: what it did, and what the others did."""

    compute: list[iv.Span]
    comm: list[iv.Span]
    inputs: list[iv.Span]
    busy_elsewhere: list[iv.Span]  # other devices' work (a gap then is waiting: idle)
    copies: list[iv.Span] = field(default_factory=list)
    gpu: bool = False  # a gap inside the call with no other device busy: launch (host)
    python: list[iv.Span] = field(default_factory=list)  # the program's Python ops ran


def _parts(w: Window, sets: _Sets) -> StepParts:
    """One window split in order: compute, communication, copy, input, host, idle.
    Inside the step call an uncovered moment is idle where another device worked, else
    host (the CPU's framework overhead; a GPU waiting for the host to launch work)."""
    c = iv.clip(sets.compute, w.start, w.end)
    m = iv.subtract(iv.clip(sets.comm, w.start, w.end), c)
    covered = iv.merge(c + m)
    cp = iv.subtract(iv.clip(sets.copies, w.start, w.end), covered)
    covered = iv.merge(covered + cp)
    i = iv.subtract(iv.clip(sets.inputs, w.start, w.end), covered)
    covered = iv.merge(covered + i)
    rest = iv.subtract([(w.start, w.end)], covered)
    inside = iv.clip(rest, w.start, w.call_end)
    idle = iv.intersect(inside, iv.clip(sets.busy_elsewhere, w.start, w.call_end))
    idle_in = iv.total_s(idle)
    host_in = iv.total_s(inside) - idle_in
    between = iv.total_s(iv.clip(rest, w.call_end, w.end))
    python = iv.total_s(iv.intersect(iv.subtract(rest, idle), iv.clip(sets.python, w.start,
                                                                      w.end)))
    return StepParts(w.name, (w.end - w.start) / 1e9, iv.total_s(c), iv.total_s(m),
                     iv.total_s(i), host_in + between, idle_in, between, iv.total_s(cp),
                     _edges_s(w, covered, inside, sets.busy_elsewhere), python)


def _edges_s(w: Window, covered: list[iv.Span], inside: list[iv.Span],
             elsewhere: list[iv.Span]) -> float:
    """The host time inside the call before its first piece of work and after its last
    (the whole call's host time when nothing of this device ran in it)."""
    work = iv.clip(covered, w.start, w.call_end)
    if not work:
        edges = inside
    else:
        edges = iv.clip(inside, w.start, work[0][0]) + iv.clip(inside, work[-1][1], w.call_end)
    return iv.total_s(edges) - iv.total_s(iv.intersect(edges, iv.clip(elsewhere, w.start,
                                                                      w.call_end)))


@dataclass
class _Plane:
    """One GPU plane's stream events by kind, and its TensorFlow Ops line."""

    kernels: list[Event] = field(default_factory=list)
    nccl: list[iv.Span] = field(default_factory=list)
    h2d: list[iv.Span] = field(default_factory=list)
    d2h: list[iv.Span] = field(default_factory=list)
    peer: list[iv.Span] = field(default_factory=list)
    ops: list[Event] = field(default_factory=list)

    def add(self, e: Event) -> None:
        span = (e.start_ns, e.end_ns)
        if e.line == DEVICE_OPS_LINE:
            self.ops.append(e)
        elif not e.line.startswith(STREAM_LINE_PREFIX):
            return
        elif e.name.startswith("Memcpy"):
            (self.h2d if "H2D" in e.name else self.d2h if "D2H" in e.name
             else self.peer).append(span)
        elif NCCL_MARK in e.name.lower():
            self.nccl.append(span)
        else:
            self.kernels.append(e)

    def work(self) -> list[iv.Span]:
        return iv.merge([(k.start_ns, k.end_ns) for k in self.kernels] + self.nccl + self.peer)


def _gpu_rows(planes: dict[int, _Plane], windows: list[Window],
              per_gpu: dict[int, list[Window]], inputs: list[iv.Span],
              python: list[iv.Span]) -> list[DeviceBreakdown]:
    work = {g: p.work() for g, p in planes.items()}
    rows = []
    for g, p in sorted(planes.items()):
        mine = per_gpu.get(g, windows)
        elsewhere = iv.merge(s for o, spans in work.items() if o != g for s in spans)
        copies = iv.merge(p.h2d + p.d2h)
        if work[g]:
            sets = _Sets(iv.merge((k.start_ns, k.end_ns) for k in p.kernels),
                         iv.merge(p.nccl + p.peer), inputs, elsewhere, copies, gpu=True,
                         python=python)
        else:  # no kernel: its own copies, the rest idle (the host's waits are not its)
            everything = [(w.start, w.end) for w in mine]
            sets = _Sets([], [], [], everything, copies, gpu=True)
        in_steps = iv.merge((w.start, w.end) for w in mine)
        rows.append(DeviceBreakdown(
            f"/device:GPU:{g}", "device-plane", [_parts(w, sets) for w in mine],
            len(p.kernels) + len(p.nccl),
            iv.total_s(iv.intersect(iv.merge(p.h2d), in_steps)),
            iv.total_s(iv.intersect(iv.merge(p.d2h), in_steps)),
            kernel_stats(p.kernels, p.ops, [(w.start, w.end) for w in mine])))
    return rows


def breakdown_events(path: str, planes: Sequence[str], events: Sequence[Event],
                     op_devices: Mapping[str, str] | None = None,
                     devices: Sequence[str] = ()) -> Breakdown:
    """The pure part of :func:`breakdown`: the trace's plane names and events in."""
    steps_from, windows, per_gpu, skew = find_windows(
        events, lambda e: _is_op(e) or _is_stream(e))
    inputs = iv.merge((e.start_ns, e.end_ns) for e in events if _is_input_op(e))
    python = iv.merge((e.start_ns, e.end_ns) for e in events if _is_python_op(e))
    ops = [e for e in events if _is_op(e)]
    gpu_planes = sorted({i for name in [*planes, *devices] if (i := _gpu_index(name)) is not None})
    by_plane: dict[int, _Plane] = {g: _Plane() for g in gpu_planes}
    for e in events:
        index = _gpu_index(e.plane)
        if index is not None:
            by_plane[index].add(e)
    if gpu_planes:
        rows = _gpu_rows(by_plane, windows, per_gpu, inputs, python)
    else:
        rows = _cpu_rows(windows, ops, inputs, python, op_devices, devices)
    idle_gpus = [r.device for r in rows if r.source == "device-plane" and not r.ran_kernels]
    return Breakdown(path, steps_from, [w.name for w in windows], rows, idle_gpus, skew,
                     notes=_notes(steps_from, gpu_planes, op_devices, rows),
                     host_ops_share=_host_share(ops, windows),
                     updates_per_call=_updates_per_call(ops, windows))


def _updates_per_call(ops: Sequence[Event], windows: list[Window]) -> float | None:
    """How many training steps one step call ran, from how often its ops ran in a call:
    the backward ops inside a loop's body (``while/body/.../gradient_tape/``: a loop over
    the steps inside the tf.function; an RNN's own loop is ``while_grad`` inside the
    tape, not counted), else the variable updates (an optimizer's apply, assign-sub/add,
    which TensorFlow traces only where they are not cheap). The median over the calls and
    ops; None: neither in the steps."""
    starts = [w.start for w in windows]  # sorted, one step after another
    in_loop: dict[tuple[int, str], int] = {}  # (window, op name): runs in that call
    updated: dict[tuple[int, str], int] = {}
    for e in ops:
        k = bisect.bisect_right(starts, e.start_ns) - 1
        m = OP_EVENT_RE.match(e.name)
        if k < 0 or e.start_ns >= windows[k].call_end or m is None:
            continue
        name, kind = m.group("name"), m.group("type")
        if LOOP_BACKWARD_RE.search(name):
            in_loop[(k, name)] = in_loop.get((k, name), 0) + 1
        elif kind in UPDATE_OP_TYPES or kind.startswith("ResourceApply"):
            updated[(k, name)] = updated.get((k, name), 0) + 1
    loops, updates = list(in_loop.values()), list(updated.values())
    counts = loops or updates
    return float(statistics.median(counts)) if counts else None


def _host_share(ops: Sequence[Event], windows: list[Window]) -> float:
    """The share of the steps in which a TensorFlow op ran on the host's threads."""
    span = sum(w.end - w.start for w in windows)
    if span <= 0:
        return 0.0
    busy = iv.merge((e.start_ns, e.end_ns) for e in ops)
    inside = iv.merge(s for w in windows for s in iv.clip(busy, w.start, w.end))
    return iv.total_s(inside) * 1e9 / span


def _notes(steps_from: str, gpus: list[int], op_devices: Mapping[str, str] | None,
           rows: list[DeviceBreakdown]) -> list[str]:
    notes = []
    if steps_from == "the whole trace":
        notes.append("the trace has no step marker (the host's train / TraceContext / "
                     "Profiled batch events, or a device Steps line): its whole span is "
                     "taken as one step")
    if not gpus and not op_devices:
        notes.append("a CPU trace without the placement its run recorded: virtual CPU "
                     "devices share the host's plane, so its ops are one row (/host:CPU) "
                     "and devices are not told apart")
    return notes


def _cpu_rows(windows: list[Window], ops: list[Event], inputs: list[iv.Span],
              python: list[iv.Span], op_devices: Mapping[str, str] | None,
              devices: Sequence[str]) -> list[DeviceBreakdown]:
    by_device: dict[str, tuple[list[iv.Span], list[iv.Span], list[int]]] = {}
    for name in devices:
        if "GPU" not in name:
            by_device.setdefault(name, ([], [], [0]))
    for e in ops:
        if _is_input_op(e):
            continue
        op = OP_EVENT_RE.match(e.name)
        assert op is not None
        # an op the placement does not name still ran: on a row of its own (/host:CPU),
        # so the devices count that time as waiting for it (idle), not as host overhead
        device = (device_of(op.group("name"), op_devices) if op_devices else None) or HOST_ROW
        compute, comm, count = by_device.setdefault(device, ([], [], [0]))
        (comm if _is_comm_op(e) else compute).append((e.start_ns, e.end_ns))
        count[0] += 1
    merged = {d: (iv.merge(c), iv.merge(m)) for d, (c, m, _) in by_device.items()}
    rows = []
    for device in sorted(by_device):
        mine, talk = merged[device]
        elsewhere = iv.merge(s for d, (oc, om) in merged.items() if d != device
                             for s in oc + om)
        sets = _Sets(mine, talk, inputs, elsewhere, python=python)
        parts = [_parts(w, sets) for w in windows]
        rows.append(DeviceBreakdown(device, "placement" if op_devices else "host-threads",
                                    parts, by_device[device][2][0]))
    return rows


def breakdown(path: Path, op_devices: Mapping[str, str] | None = None,
              devices: Sequence[str] = (), *, with_xprof: bool = True) -> Breakdown:
    """The breakdown of one trace file; xprof's input-pipeline analysis beside it."""
    planes, events = read_events(path)
    result = breakdown_events(str(path), planes, events, op_devices, devices)
    if not with_xprof:
        return result
    try:
        view = xprof_view(path)
    except TraceError as exc:
        return replace(result, xprof_error=str(exc))
    return replace(result, xprof=view)


