"""Device setup inside a child process: real GPUs, one GPU split, or virtual CPU devices.

Runs before TensorFlow initialises its devices (configuration is frozen after that).

- ``gpu``: physical GPUs (as CUDA_VISIBLE_DEVICES shows them); the first ``n_devices``
  are made visible, the compute devices are ``/device:GPU:0..n-1``.
- ``virtual-gpu`` (``--virtual-gpus N``): the first physical GPU split into N logical
  GPUs with ``memory_limit_mb`` each (``tf.config.set_logical_device_configuration``);
  NVML sees one physical device behind all of them.
- ``virtual-cpu``: no GPU. The CPU is split into ``n_devices + 1`` logical devices:
  ``/device:CPU:0`` stays the host, ``/device:CPU:1..n`` stand in for GPUs. They share
  the same cores, so placement is real but throughput scaling is not meaningful.
"""

from __future__ import annotations

import os
from typing import Any

from gpudiag.devnames import device_name
from gpudiag.records.devices import (
    DEFAULT_VIRTUAL_DEVICES,
    DEFAULT_VIRTUAL_GPU_MEMORY_MB,
    DEVICE_ENV_VARS,
    DeviceRequestError,
    DeviceSetup,
)


def physical_gpu_details(tf: Any) -> list[dict[str, Any]]:
    """Physical GPUs with ``tf.config.experimental.get_device_details`` (name, capability)."""
    out = []
    for index, gpu in enumerate(tf.config.list_physical_devices("GPU")):
        try:
            details = dict(tf.config.experimental.get_device_details(gpu))
        except Exception as exc:  # details are best effort; TF raises for odd devices
            details = {"error": str(exc)}
        if "compute_capability" in details and details["compute_capability"] is not None:
            details["compute_capability"] = list(details["compute_capability"])
        out.append({"index": index, "name": gpu.name, **details})
    return out


def setup(
    n_devices: int | None = None,
    *,
    virtual_gpus: int | None = None,
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB,
    log_device_placement: bool = False,
) -> DeviceSetup:
    """Configure TensorFlow's devices for ``n_devices`` compute devices and return them.

    ``n_devices`` None means: every physical GPU, all ``virtual_gpus``, or
    DEFAULT_VIRTUAL_DEVICES (``virtual_gpus`` when given) virtual CPU devices.
    """
    import tensorflow as tf

    if log_device_placement:
        # Must happen before the eager context initialises, or TF logs nothing.
        tf.debugging.set_log_device_placement(True)
    gpus = tf.config.list_physical_devices("GPU")
    cvd = os.environ.get("CUDA_VISIBLE_DEVICES")
    details = physical_gpu_details(tf) if gpus else []
    if gpus and virtual_gpus:
        n_devices = virtual_gpus if n_devices is None else n_devices
        if n_devices > virtual_gpus:
            raise DeviceRequestError(
                f"{n_devices} devices asked for but --virtual-gpus splits GPU:0 into {virtual_gpus}"
            )
        tf.config.set_visible_devices(gpus[:1], "GPU")
        tf.config.set_logical_device_configuration(
            gpus[0],
            [tf.config.LogicalDeviceConfiguration(memory_limit=memory_limit_mb)] * virtual_gpus,
        )
        kind = "virtual-gpu"
        note = (f"physical GPU 0 split into {virtual_gpus} logical GPUs of {memory_limit_mb} MB; "
                "NVML sees one physical device behind all of them")
        compute = [device_name("GPU", i) for i in range(n_devices)]
    elif gpus:
        n_devices = len(gpus) if n_devices is None else n_devices
        if n_devices > len(gpus):
            raise DeviceRequestError(
                f"{n_devices} GPUs asked for but TensorFlow sees {len(gpus)}; "
                "use --virtual-gpus N to split one GPU"
            )
        tf.config.set_visible_devices(gpus[:n_devices], "GPU")
        kind, note = "gpu", f"{n_devices} of {len(gpus)} physical GPU(s) used"
        compute = [device_name("GPU", i) for i in range(n_devices)]
    else:
        if n_devices is None:
            n_devices = virtual_gpus or DEFAULT_VIRTUAL_DEVICES
        if virtual_gpus and n_devices > virtual_gpus:
            raise DeviceRequestError(
                f"{n_devices} devices asked for but --virtual-gpus {virtual_gpus} makes "
                f"{virtual_gpus} virtual CPU devices here (no GPU); ask for at most "
                f"{virtual_gpus}")
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(n_devices + 1)]
        )
        kind = "virtual-cpu"
        note = (f"no GPU visible to TensorFlow: {n_devices} virtual CPU devices stand in for "
                "GPUs (CPU:0 is the host); they share the same cores")
        compute = [device_name("CPU", i) for i in range(1, n_devices + 1)]
    logical = [d.name for d in tf.config.list_logical_devices()]
    return DeviceSetup(
        kind=kind,
        host_device=device_name("CPU", 0),
        compute_devices=compute,
        logical_devices=logical,
        physical_gpus=details,
        cuda_visible_devices=cvd,
        note=note,
    )


def device_env() -> dict[str, str | None]:
    """The device-related environment variables, set or not."""
    return {name: os.environ.get(name) for name in DEVICE_ENV_VARS}
