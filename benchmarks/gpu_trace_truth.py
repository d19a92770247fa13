"""The truth of a GPU trace, from its raw XSpace events, independent of gpudiag's readers.

Used to write the TRUTH in each tests/data/gpu_traces/<name>/README.md. It reads the
trace with xprof's XSpace reader and nothing of gpudiag, and prints, for the window from
the first host step marker's start to the last one's start (the complete start-to-start
steps; with no marker, the GPUs' own ``Steps`` line, the profiler's per-device step events,
chained the same way; the whole span of the events when there is neither):

- the steps: how many, and the mean period; the share of the window outside the step
  calls (the host's step markers; in a window from the Steps line, the host's tf.function
  calls: the GPU runs on after the call returns, so also the share outside them with no
  kernel, copy or tf.data wait);
- per GPU plane: kernels (events on its ``Stream`` lines that are not ``Memcpy``), their
  count per step and median duration, the share of the window with a kernel running
  (the union of the kernel intervals), and the host-to-device / device-to-host copy time;
- the tf.data iterator time on the host: the union of the ``IteratorGetNext`` op events
  and the iterator kernels' ``...GetNext...::DoCompute`` events, per step.

    python benchmarks/gpu_trace_truth.py TRACE.xplane.pb [...]
"""

from __future__ import annotations

import re
import statistics
import sys

from xprof.profile_data import ProfileData

MARKERS = ("train", "TraceContext", "Profiled batch")
CALL_RE = re.compile(r"^Eager(?:Local)?Execute: __inference_")  # a tf.function's call


def union_ns(spans: list[tuple[int, int]]) -> int:
    total, end = 0, None
    start = 0
    for a, b in sorted(spans):
        if end is None or a > end:
            if end is not None:
                total += end - start
            start, end = a, b
        else:
            end = max(end, b)
    return total + ((end - start) if end is not None else 0)


def clip(spans: list[tuple[int, int]], lo: int, hi: int) -> list[tuple[int, int]]:
    return [(max(a, lo), min(b, hi)) for a, b in spans if b > lo and a < hi]


def window(planes: dict[str, list[tuple[str, str, int, int]]],
           host: list[tuple[str, str, int, int]]) -> tuple[int, int, int, str]:
    """The window judged (its start, end, steps, and how it was found): the first to the
    last host step marker's start; one marker: that step; no marker: the GPUs' ``Steps``
    line (the profiler's own per-device step events; a step's span over all GPUs), chained
    the same way; nothing of these: the whole span of the events."""
    marks = sorted((r[2], r[3]) for r in host if r[1] in MARKERS)
    if len(marks) >= 2:
        return (marks[0][0], marks[-1][0], len(marks) - 1,
                f"{len(marks)} host step markers, {len(marks) - 1} start-to-start steps")
    if marks:
        return marks[0][0], marks[0][1], 1, "1 host step marker: that step"
    device: dict[str, list[int]] = {}
    for name, rows in planes.items():
        for line, ev, a, b in rows:
            if name.startswith("/device:GPU:") and line == "Steps":
                s = device.setdefault(ev, [a, b])
                s[0], s[1] = min(s[0], a), max(s[1], b)
    spans = [(r[2], r[3]) for rows in planes.values() for r in rows]
    whole = f"the trace spans {(max(b for _, b in spans) - min(a for a, _ in spans)) / 1e6:.3f} ms"
    if len(device) >= 2:
        starts = sorted(a for a, _ in device.values())
        return (starts[0], starts[-1], len(starts) - 1,
                f"no host step markers; the GPUs' Steps line: {len(starts) - 1} "
                f"start-to-start steps; {whole}")
    if device:
        ((a, b),) = device.values()
        return a, b, 1, f"no host step markers; the GPUs' Steps line: 1 step; {whole}"
    return (min(a for a, _ in spans), max(b for _, b in spans), 1,
            "no host step markers: the whole trace as one step")


def truth(path: str) -> None:
    planes: dict[str, list[tuple[str, str, int, int]]] = {}
    with ProfileData.from_file(path) as data:
        for plane in data.planes:
            rows = planes.setdefault(plane.name, [])
            for line in plane.lines:
                for ev in line.events:
                    start = int(ev.start_ns)
                    rows.append((line.name, ev.name, start, start + int(ev.duration_ns)))
    host = [r for name, rows in planes.items() if name.startswith("/host:CPU") for r in rows]
    lo, hi, steps, how = window(planes, host)
    span = hi - lo
    it = [(a, b) for line, ev, a, b in host
          if ev.endswith((":IteratorGetNext", ":IteratorGetNextSync"))
          or (ev.endswith("Op::DoCompute") and "GetNext" in ev)]
    calls = [(r[2], r[3]) for r in host if r[1] in MARKERS]
    between = span - union_ns(clip(calls, lo, hi)) if len(calls) >= 2 else 0
    idle = ""
    if "Steps line" in how:  # the step call: the host's tf.function calls in the window
        calls = [(r[2], r[3]) for r in host if CALL_RE.match(r[1])]
        between = span - union_ns(clip(calls, lo, hi))
        streams = [(a, b) for name, rows in planes.items() if name.startswith("/device:GPU:")
                   for line, _, a, b in rows if line.startswith("Stream")]
        idle = (f"; with no GPU kernel, copy or tf.data wait then "
                f"{(span - union_ns(clip(calls + streams + it, lo, hi))) / span:.1%}")
    print(f"== {path}\nsteps: {how}; mean period {span / steps / 1e6:.3f} ms; "
          f"outside the step calls (host between steps) {between / span:.1%}{idle}")
    for name in sorted(planes):
        if not name.startswith("/device:GPU:"):
            continue
        rows = planes[name]
        kernels = [(a, b) for line, ev, a, b in rows if line.startswith("Stream")
                   and not ev.startswith("Memcpy") and b > lo and a < hi]
        h2d = [(a, b) for line, ev, a, b in rows if line.startswith("Stream") and "H2D" in ev]
        d2h = [(a, b) for line, ev, a, b in rows if line.startswith("Stream") and "D2H" in ev]
        if not kernels:
            print(f"{name}: {len(rows)} events, no kernel in the window")
            continue
        med = statistics.median(b - a for a, b in kernels) / 1e3
        busy = union_ns(clip(kernels, lo, hi)) / span
        print(f"{name}: {len(kernels)} kernels ({len(kernels) / steps:.1f} per step), "
              f"median {med:.1f} us, busy {busy:.1%} of the window; "
              f"H2D {union_ns(clip(h2d, lo, hi)) / steps / 1e6:.3f} ms per step "
              f"({union_ns(clip(h2d, lo, hi)) / span:.1%}), "
              f"D2H {union_ns(clip(d2h, lo, hi)) / steps / 1e6:.3f} ms per step")
    it_ns = union_ns(clip(it, lo, hi))
    print(f"tf.data iterator on the host: {it_ns / steps / 1e6:.3f} ms per step "
          f"({it_ns / span:.1%} of the window)")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        truth(arg)
