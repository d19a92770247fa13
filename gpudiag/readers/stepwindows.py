"""The steps of a trace: the windows each device's time is split in
(gpudiag.readers.stepbreakdown). The host's step markers (``tf.profiler.experimental.Trace
("train", ...)``: gpudiag's and tf_keras's fit; TraceContext; Keras 3's ``Profiled
batch``), each step from its start to the next step's start; where a trace has no host
marker, the device planes' derived ``Steps`` line (TensorFlow 2.4-era GPU traces), the step
call in each window being the host's tf.function calls in it; else the whole trace as one
step. Pure: events in.
"""

from __future__ import annotations

import dataclasses
import itertools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpudiag.readers import intervals as iv
from gpudiag.readers.traces import GPU_PLANE_RE, HOST_PLANE_PREFIX, STEP_MARKERS, Event

STEPS_LINE = "Steps"
# the host's call of a tf.function (TensorFlow 2.4: EagerExecute and EagerLocalExecute;
# 2.21: EagerLocalExecute), the step call in a window from a device Steps line
FUNCTION_CALL_RE = re.compile(r"^Eager(?:Local)?Execute: __inference_")


@dataclass(frozen=True)
class Window:
    name: str
    start: float
    end: float  # the next step's start, or this step's end
    call_end: float  # the end of the step call itself


def find_windows(events: Sequence[Event], is_work: Callable[[Event], bool]
                 ) -> tuple[str, list[Window], dict[int, list[Window]], float | None]:
    """How the steps were found, the steps, each GPU's own steps (from its Steps line),
    and the largest gap between the replicas' starts of one step (None: one device).
    ``is_work``: the events whose span is the whole trace when nothing marks a step."""
    by_line: dict[tuple[str, str], list[Event]] = {}  # one marker name on one thread
    for e in events:
        if e.plane.startswith(HOST_PLANE_PREFIX) and e.name in STEP_MARKERS:
            by_line.setdefault((e.line, e.name), []).append(e)
    if by_line:
        busiest = max(by_line, key=lambda line: len(by_line[line]))
        marks = _outermost(sorted(by_line[busiest], key=lambda e: e.start_ns))
        return "host step markers", _chain([(str(i), e.start_ns, e.end_ns)
                                             for i, e in enumerate(marks)]), {}, None
    steps: dict[str, list[float]] = {}
    own: dict[int, list[tuple[str, float, float]]] = {}
    starts: dict[str, list[float]] = {}
    for e in events:
        g = GPU_PLANE_RE.match(e.plane)
        if g and e.line == STEPS_LINE:
            span = steps.setdefault(e.name, [e.start_ns, e.end_ns])
            span[0], span[1] = min(span[0], e.start_ns), max(span[1], e.end_ns)
            own.setdefault(int(g.group(1)), []).append((e.name, e.start_ns, e.end_ns))
            starts.setdefault(e.name, []).append(e.start_ns)
    if steps:
        calls = iv.merge((e.start_ns, e.end_ns) for e in events if
                         e.plane.startswith(HOST_PLANE_PREFIX) and FUNCTION_CALL_RE.match(e.name))
        ordered = sorted(steps.items(), key=lambda kv: kv[1][0])
        per_gpu = {g: _call_ends(_chain(sorted(marks, key=lambda m: m[1])), calls)
                   for g, marks in own.items()}
        skew = max(max(v) - min(v) for v in starts.values()) / 1e9 if len(own) > 1 \
            else None
        return ("device Steps line",
                _call_ends(_chain([(k, a, b) for k, (a, b) in ordered]), calls), per_gpu, skew)
    spans = [(e.start_ns, e.end_ns) for e in events if is_work(e)]
    if not spans:
        return "the whole trace", [], {}, None
    a, b = min(s for s, _ in spans), max(t for _, t in spans)
    return "the whole trace", [Window("trace", a, b, b)], {}, None


def _call_ends(windows: list[Window], calls: list[iv.Span]) -> list[Window]:
    """A device's step (its Steps event) runs from its first to its last piece of work,
    which the host's call of the step function may end long before: the GPU runs what
    was launched after the call returns, and the step's last copy or op can come from
    Python after it (a Keras fit's per-batch callbacks). The step call in such a window
    ends where the host's last tf.function call in it ends; after it the host is outside
    the call. No call in a window: the whole window is the call."""
    out = []
    for w in windows:
        ends = [b for a, b in calls if a < w.end and b > w.start]
        out.append(dataclasses.replace(w, call_end=min(w.call_end, max(ends))) if ends else w)
    return out


def _outermost(marks: list[Event]) -> list[Event]:
    """Markers of one thread less those inside another: one step each. A tf.function the
    program named ``train`` gets TensorFlow's own trace of the call, ``train``, inside
    gpudiag's step marker of the same name; chained, the two made every other step a few
    microseconds long."""
    out: list[Event] = []
    for e in marks:
        if out and e.start_ns < out[-1].end_ns:
            continue
        out.append(e)
    return out


def _chain(marks: list[tuple[str, float, float]]) -> list[Window]:
    """Start-to-start periods; a lone step stands for itself."""
    if len(marks) == 1:
        name, a, b = marks[0]
        return [Window(name, a, b, b)]
    return [Window(name, a, nxt[1], min(b, nxt[1]))
            for (name, a, b), nxt in itertools.pairwise(marks)]
