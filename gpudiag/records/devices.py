"""The devices a probe child set up, as a record both sides of the process boundary read.

``DeviceSetup`` is what gpudiag.probes.devices.setup returns inside the child and what the
parent's verdicts read back (``to_dict``/``from_dict``); the defaults live here once.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

# Environment variables that change how TensorFlow finds and uses devices.
DEVICE_ENV_VARS = (
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "TF_FORCE_GPU_ALLOW_GROWTH",
    "TF_GPU_ALLOCATOR",
    "TF_CPP_MIN_LOG_LEVEL",
    "TF_CPP_MAX_VLOG_LEVEL",
    "TF_ENABLE_ONEDNN_OPTS",
    "TF_GPU_THREAD_MODE",
    "TF_XLA_FLAGS",
    "XLA_FLAGS",
    "NVIDIA_VISIBLE_DEVICES",
    "LD_LIBRARY_PATH",
)

DEFAULT_VIRTUAL_DEVICES = 2
DEFAULT_VIRTUAL_GPU_MEMORY_MB = 1024


class DeviceRequestError(Exception):
    """More devices were asked for than exist; the message says what exists."""


@dataclass(frozen=True)
class DeviceSetup:
    kind: str  # "gpu" | "virtual-gpu" | "virtual-cpu"
    host_device: str
    compute_devices: list[str]
    logical_devices: list[str]
    physical_gpus: list[dict[str, Any]] = field(default_factory=list)
    cuda_visible_devices: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["summary"] = f"{len(self.compute_devices)} {self.kind} device(s): " + ", ".join(
            self.compute_devices
        )
        return d

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DeviceSetup:
        """``to_dict``'s output back (its derived ``summary`` is dropped)."""
        return cls(**{k: v for k, v in data.items() if k != "summary"})
