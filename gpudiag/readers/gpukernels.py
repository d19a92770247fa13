"""What a GPU's kernels were, from its device plane: how many per step, how long, the gaps
between them, the top kernels and ops by time, and the share in half precision and on
Tensor Cores. Plain data in (gpudiag.readers.traces.Event), no TensorFlow.

Half precision and Tensor Cores are read from the kernel's name, as xprof's kernel_stats
does (its ``IsKernelUsingTensorCore`` matches the cuDNN/cuBLAS name patterns): cuBLAS and
cuDNN name their Tensor Core kernels by the MMA shape (``h884``, ``h1688``, ``s1688``,
``i8816``), CUTLASS by ``tensorop``, and other half kernels carry ``fp16``, ``half`` or
``bf16``. A name that says none of these counts as neither: the shares are lower bounds.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

from gpudiag.readers import intervals as iv
from gpudiag.readers.traces import OP_EVENT_RE, Event, NamedTime

HALF_RE = re.compile(r"(?i)(?<![a-z])h(?:884|1688|16816|mma)|fp16|half|bf16|bfloat16|f16")
TENSOR_CORE_RE = re.compile(r"(?i)[hsi](?:884|1688|16816|8816)|hmma|wmma|xmma|tensorop|"
                            r"_tc_|tensorcore")
TOP_KERNELS = 5


@dataclass(frozen=True)
class KernelStats:
    """A GPU's kernels inside the profiled steps."""

    kernels_per_step: float
    median_kernel_s: float
    mean_kernel_s: float
    mean_gap_s: float  # between one kernel's end and the next one's start, inside a step
    half_share: float  # of the kernel time: kernels named as float16/bfloat16
    tensor_core_share: float  # of the kernel time: kernels named as Tensor Core kernels
    top_kernels: list[NamedTime] = field(default_factory=list)
    top_ops: list[NamedTime] = field(default_factory=list)  # the plane's TensorFlow Ops line


def _top(totals: dict[str, list[float]]) -> list[NamedTime]:
    ranked = sorted(totals.items(), key=lambda kv: -kv[1][0])[:TOP_KERNELS]
    return [NamedTime(name, v[0], int(v[1])) for name, v in ranked]


def _gaps(kernels: list[iv.Span], windows: Sequence[iv.Span]) -> list[float]:
    out: list[float] = []
    for a, b in windows:
        inside = iv.clip(kernels, a, b)
        out += [(nxt[0] - cur[1]) / 1e9 for cur, nxt in itertools.pairwise(inside)]
    return out


def kernel_stats(kernels: Sequence[Event], op_events: Sequence[Event],
                 windows: Sequence[iv.Span]) -> KernelStats | None:
    """Statistics of ``kernels`` (one GPU's stream kernels) that start inside ``windows``
    (the steps); ``op_events``: the events of its ``TensorFlow Ops`` line. None: no kernel."""
    inside = [k for k in kernels if any(a <= k.start_ns < b for a, b in windows)]
    if not inside or not windows:
        return None
    durations = [(k.end_ns - k.start_ns) / 1e9 for k in inside]
    total = sum(durations) or 1.0
    by_name: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for k, d in zip(inside, durations, strict=True):
        by_name[k.name][0] += d
        by_name[k.name][1] += 1
    half = sum(v[0] for n, v in by_name.items() if HALF_RE.search(n))
    tensor = sum(v[0] for n, v in by_name.items() if TENSOR_CORE_RE.search(n))
    ops: dict[str, list[float]] = defaultdict(lambda: [0.0, 0])
    for e in op_events:
        m = OP_EVENT_RE.match(e.name)
        if m and any(a <= e.start_ns < b for a, b in windows):
            ops[m.group("type")][0] += (e.end_ns - e.start_ns) / 1e9
            ops[m.group("type")][1] += 1
    gaps = _gaps(iv.merge((k.start_ns, k.end_ns) for k in inside), windows)
    return KernelStats(
        kernels_per_step=len(inside) / len(windows),
        median_kernel_s=statistics.median(durations), mean_kernel_s=total / len(inside),
        mean_gap_s=sum(gaps) / len(gaps) if gaps else 0.0,
        half_share=half / total, tensor_core_share=tensor / total,
        top_kernels=_top(by_name), top_ops=_top(ops))
