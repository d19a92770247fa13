"""The truth of a GPU trace, from its raw XSpace events, independent of gpudiag's readers.

Used to write the TRUTH in each tests/data/gpu_traces/<name>/README.md. It reads the
trace with xprof's XSpace reader and nothing of gpudiag, and prints, for the window from
the first host step marker's start to the last one's start (the complete start-to-start
steps; the whole span of the events when there is no marker):

- the steps: how many, and the mean period;
- per GPU plane: kernels (events on its ``Stream`` lines that are not ``Memcpy``), their
  count per step and median duration, the share of the window with a kernel running
  (the union of the kernel intervals), and the host-to-device / device-to-host copy time;
- the tf.data iterator time on the host: the union of the ``IteratorGetNext`` op events
  and the iterator kernels' ``...GetNext...::DoCompute`` events, per step.

    python benchmarks/gpu_trace_truth.py TRACE.xplane.pb [...]
"""

from __future__ import annotations

import statistics
import sys

from xprof.profile_data import ProfileData

MARKERS = ("train", "TraceContext", "Profiled batch")


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
    marks = sorted(r[2] for r in host if r[1] in MARKERS)
    if len(marks) >= 2:
        lo, hi, steps = marks[0], marks[-1], len(marks) - 1
        how = f"{len(marks)} host step markers, {steps} start-to-start steps"
    else:
        spans = [(r[2], r[3]) for rows in planes.values() for r in rows]
        lo, hi, steps = min(a for a, _ in spans), max(b for _, b in spans), 1
        how = "no host step markers: the whole trace as one step"
    window = hi - lo
    calls = [(r[2], r[3]) for r in host if r[1] in MARKERS]
    between = window - union_ns(clip(calls, lo, hi)) if len(marks) >= 2 else 0
    print(f"== {path}\nsteps: {how}; mean period {window / steps / 1e6:.3f} ms; "
          f"outside the step calls (host between steps) {between / window:.1%}")
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
        busy = union_ns(clip(kernels, lo, hi)) / window
        print(f"{name}: {len(kernels)} kernels ({len(kernels) / steps:.1f} per step), "
              f"median {med:.1f} us, busy {busy:.1%} of the window; "
              f"H2D {union_ns(clip(h2d, lo, hi)) / steps / 1e6:.3f} ms per step "
              f"({union_ns(clip(h2d, lo, hi)) / window:.1%}), "
              f"D2H {union_ns(clip(d2h, lo, hi)) / steps / 1e6:.3f} ms per step")
    it = [(a, b) for line, ev, a, b in host
          if ev.endswith((":IteratorGetNext", ":IteratorGetNextSync"))
          or (ev.endswith("Op::DoCompute") and "GetNext" in ev)]
    it_ns = union_ns(clip(it, lo, hi))
    print(f"tf.data iterator on the host: {it_ns / steps / 1e6:.3f} ms per step "
          f"({it_ns / window:.1%} of the window)")


if __name__ == "__main__":
    for arg in sys.argv[1:]:
        truth(arg)
