"""An eager loop's profiled steps: the ops' own time against Python's dispatch of them
(parent side, no TensorFlow).

An eager step has no step function: TensorFlow runs each op from the Python thread as it
is called. Its trace holds, per op, ``EagerKernelExecute`` (the kernel running) inside
``EagerExecute`` (the dispatch: argument checks, placement, the kernel); the input wait
is ``IteratorGetNextOp``. Over gpudiag's step windows (``train`` markers, one gradient
call to the next: gpudiag.inprogram.eagersteps) the kernels' merged time is the op
time, the iterator's the input, and the rest of the step is Python and dispatch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudiag.readers import intervals as iv
from gpudiag.readers import traces

KERNEL = "EagerKernelExecute"
INPUT = "IteratorGetNextOp"
MARKER = "train"


def eager_split(path: Path) -> dict[str, Any] | None:
    """Mean seconds per profiled step: period, op (kernel) time, input wait and the rest
    (dispatch); None when the trace has no complete step marker."""
    _, events = traces.read_events(path)
    marks = sorted((e for e in events if e.name == MARKER and e.line == "python"),
                   key=lambda e: e.start_ns)
    if not marks:
        return None
    kernels = iv.merge((e.start_ns, e.end_ns) for e in events if e.name == KERNEL)
    inputs = iv.merge((e.start_ns, e.end_ns) for e in events if e.name == INPUT)
    period = sum(m.end_ns - m.start_ns for m in marks) / len(marks) / 1e9
    op = sum(iv.total_s(iv.clip(kernels, m.start_ns, m.end_ns)) for m in marks) / len(marks)
    wait = sum(iv.total_s(iv.clip(inputs, m.start_ns, m.end_ns)) for m in marks) / len(marks)
    ops = sum(1 for e in events if e.name == KERNEL and marks[0].start_ns <= e.start_ns
              <= marks[-1].end_ns) / len(marks)
    return {"steps": len(marks), "period_s": period, "op_s": op, "input_s": wait,
            "dispatch_s": max(0.0, period - op - wait), "ops_per_step": ops,
            "trace": str(path)}
