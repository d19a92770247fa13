"""A profiled step's breakdown as records (gpudiag.readers.stepbreakdown builds them from a
trace): each step on each device in its parts (StepParts), each device's steps
(DeviceBreakdown), the whole trace's (Breakdown, with xprof's view beside it).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from gpudiag.layout.evidence import HOST_ROW as HOST_ROW  # the row, declared there
from gpudiag.readers.gpukernels import KernelStats
from gpudiag.readers.xprofview import XprofView


@dataclass(frozen=True)
class StepParts:
    """One step on one device, in seconds; the parts add up to ``period_s``."""

    step: str
    period_s: float  # start to the next step's start (the last: start to end)
    compute_s: float
    communication_s: float
    input_s: float
    host_s: float
    idle_s: float
    host_between_calls_s: float = 0.0  # the part of host_s outside the step call
    copy_s: float = 0.0  # host-to-device and device-to-host copies (a GPU)
    # the part of the host time inside the call before its first piece of work and after
    # its last: paid once a call (steps_per_execution=N pays it once per N steps); the
    # gaps between the pieces are paid every step
    host_call_edges_s: float = 0.0
    # the part of host_s while the program's own Python ran inside tf.data (a generator,
    # a py_function: PyFunc ops on any thread): the step's Python then waits for the GIL
    host_python_ops_s: float = 0.0

    @property
    def launch_s(self) -> float:
        """The part of host_s inside the step call: no op ran (CPU), or the GPU waited
        for the host to launch work."""
        return self.host_s - self.host_between_calls_s

    def share(self, part_s: float) -> float:
        return part_s / self.period_s if self.period_s > 0 else 0.0


# StepParts' numbers, in order (a mean step averages each)
PART_FIELDS = ("period_s", "compute_s", "communication_s", "input_s", "host_s", "idle_s",
               "host_between_calls_s", "copy_s", "host_call_edges_s", "host_python_ops_s")


@dataclass(frozen=True)
class DeviceBreakdown:
    device: str  # /device:GPU:3, /device:CPU:1, or /host:CPU (no placement known)
    source: str  # "device-plane" (GPU streams) | "placement" | "host-threads"
    steps: list[StepParts]
    kernels: int  # kernels on the streams (GPU), op events (CPU)
    h2d_s: float = 0.0  # host-to-device copies in the steps (GPU)
    d2h_s: float = 0.0
    kernel_stats: KernelStats | None = None  # a GPU's kernels (None: no kernel, or a CPU)

    @property
    def ran_kernels(self) -> bool:
        return self.kernels > 0

    def mean(self) -> StepParts | None:
        """The mean step (None: no step)."""
        if not self.steps:
            return None
        n = len(self.steps)

        def avg(name: str) -> float:
            return sum(getattr(s, name) for s in self.steps) / n
        return StepParts("mean", *(avg(f) for f in PART_FIELDS))


@dataclass(frozen=True)
class Breakdown:
    path: str
    steps_from: str  # "host step markers" | "device Steps line" | "the whole trace"
    step_names: list[str]
    devices: list[DeviceBreakdown]
    gpus_without_kernels: list[str]  # GPU planes in the trace that ran no kernel
    replica_skew_s: float | None = None  # the most one replica started a step after another
    xprof: XprofView | None = None
    xprof_error: str | None = None
    notes: list[str] = field(default_factory=list)
    host_ops_share: float = 0.0  # of the steps: a TensorFlow op ran on the host's threads
    # training steps one step call ran: how often each variable update op ran in a call
    # (the median over them; a loop over the iterator inside the tf.function runs its
    # body's updates once a step). None: no update op in the steps
    updates_per_call: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
