"""The all-reduce's bytes and the bandwidth it achieved: for a MirroredStrategy program whose
step the trace finds communication-bound.

Pure. The bytes are what the in-program hooks saw (gpudiag.inprogram.weights): for a step
tf.function, the trainable variables it captured, summed per device and taken on one
replica's device (bytes_by_device); for Keras fit, the model's trainable weights, each once
(logical_bytes). Either is the gradient bytes each replica all-reduces per step. The time is the
trace's collective communication per step (gpudiag.readers.stepbreakdown). Nothing is
guessed: without either, there is no note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


def _device_tail(device: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``device:cpu:1``."""
    return device.lower().rsplit("/", 1)[-1]


def gradient_bytes(by_device: Mapping[str, int] | None,
                   replica_devices: Sequence[str]) -> int | None:
    """The bytes of trainable variables on a replica's device (the largest replica's), or
    None when the hooks saw none there."""
    if not by_device or not replica_devices:
        return None
    tails = {_device_tail(r) for r in replica_devices}
    on_replicas = [b for d, b in by_device.items() if _device_tail(d) in tails]
    return max(on_replicas) if on_replicas else None


def _bytes_text(n: float) -> str:
    for unit, size in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n:.0f} B"


def _rate_text(bytes_per_s: float) -> str:
    for unit, size in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if bytes_per_s >= size:
            return f"{bytes_per_s / size:.2f} {unit}"
    return f"{bytes_per_s:.0f} B/s"


@dataclass(frozen=True)
class AllReduce:
    gradient_bytes: int  # per replica per step
    communication_s: float  # collectives per step (trace)
    period_s: float  # the step

    @property
    def bytes_per_s(self) -> float:
        return self.gradient_bytes / self.communication_s

    def text(self) -> str:
        return (f"{_bytes_text(self.gradient_bytes)} of gradients per replica per step (the "
                f"sizes of its trainable variables) all-reduced in "
                f"{self.communication_s * 1e3:.2f} ms: {_rate_text(self.bytes_per_s)} "
                f"achieved; at that bandwidth the all-reduce alone holds each step to at "
                f"least {self.communication_s * 1e3:.2f} ms of the {self.period_s * 1e3:.2f} "
                f"ms unless it moves fewer bytes or overlaps compute")

    def evidence(self) -> dict[str, Any]:
        return {"gradient_bytes_per_replica": self.gradient_bytes,
                "communication_s_per_step": self.communication_s,
                "achieved_bytes_per_s": self.bytes_per_s, "step_s": self.period_s}


def all_reduce(gradient_bytes_per_replica: int | None, communication_s: float,
               period_s: float) -> AllReduce | None:
    if not gradient_bytes_per_replica or communication_s <= 0:
        return None
    return AllReduce(gradient_bytes_per_replica, communication_s, period_s)
