"""Memory probe: one TensorFlow memory mode per child process, the same allocation pattern.

Modes (``config["mode"]``), each needing a fresh process because TensorFlow freezes its
device configuration once devices are initialised:

- ``default``: nothing set; TensorFlow's BFC allocator reserves most of the GPU up front.
- ``growth``: ``tf.config.experimental.set_memory_growth(gpu, True)`` before any op.
- ``growth_env``: the environment variable ``TF_FORCE_GPU_ALLOW_GROWTH=true`` (set by the
  parent for this child), no code.
- ``limit``: ``tf.config.set_logical_device_configuration(gpu,
  [tf.config.LogicalDeviceConfiguration(memory_limit=MB)])``, the TF2 successor of
  ``per_process_gpu_memory_fraction``; then one allocation past the limit, which must
  raise ResourceExhaustedError inside this process while the process keeps working.
- ``modify_after_init``: the classic mistake: change the configuration after the devices
  are initialised. With a GPU, ``set_memory_growth`` raises "Physical devices cannot be
  modified after being initialized" (and ``set_logical_device_configuration`` "Virtual
  devices ..."); without one, the CPU's ``set_logical_device_configuration`` shows the same
  rule.

The pattern: ``steps`` tensors of ``step_mb`` MiB each, allocated one by one on the first
GPU (``/GPU:0``) and held, then released. After initialisation, after each step and
after release the probe reads TensorFlow's view (``tf.config.experimental.get_memory_info``:
current and peak bytes) and NVML's view from inside this process (the device's used
memory, and this process's own used memory: ``nvidia-smi --query-compute-apps=pid,used_memory``).
Without a GPU the same pattern runs on ``/CPU:0``, where TensorFlow reports its CPU
allocator's memory info.

Modes other than ``growth_env`` remove an inherited ``TF_FORCE_GPU_ALLOW_GROWTH`` before
TensorFlow is imported (TensorFlow reads it when it creates the GPU devices); the result
says when that happened. The result is a probes.results.MemoryResult, as a dict.
"""

from __future__ import annotations

import os
import time
from dataclasses import replace
from typing import Any

from gpudiag import nvml
from gpudiag.records.results import (
    AllocationError,
    AllocationPattern,
    ConfigAttempt,
    MemoryConfig,
    MemoryNvml,
    MemoryReading,
    MemoryResult,
    PastLimit,
)

MIB = 2**20
ENV_GROWTH = "TF_FORCE_GPU_ALLOW_GROWTH"
MODES = ("default", "growth", "growth_env", "limit", "modify_after_init")


class NvmlView:
    """NVML readings of the NVML device behind TensorFlow's GPU:0, from inside the child.

    ``backend`` is opened and closed by the caller (``run``); a failing NVML makes the view
    stop reading and say why (``reason``), it never raises.
    """

    def __init__(self, backend: nvml.NvmlBackend | nvml.NvmlUnavailable) -> None:
        self.reason: str | None = None
        self.index: int | None = None
        self.mapping_note: str | None = None
        self.total_bytes: int | None = None
        self.baseline_used_bytes: int | None = None
        self._backend: nvml.NvmlBackend | None = None
        if isinstance(backend, nvml.NvmlUnavailable):
            self.reason = backend.reason
            return
        found = nvml.gpu0_device(
            backend, cuda_visible_devices=os.environ.get("CUDA_VISIBLE_DEVICES"),
            cuda_device_order=os.environ.get("CUDA_DEVICE_ORDER"),
        )
        if isinstance(found, str):
            self.reason = found
            return
        self.index = found.info.index
        self.mapping_note = found.mapping.note
        self.total_bytes = nvml.or_none(found.info.memory_total_bytes)
        self._backend = backend
        self.baseline_used_bytes = self.read().get("nvml_device_used_bytes")

    def read(self) -> dict[str, int | None]:
        """``nvml_device_used_bytes`` and ``nvml_process_used_bytes`` now; {} without NVML."""
        if self._backend is None or self.index is None:
            return {}
        try:
            state = self._backend.device_state(self.index)
            procs = self._backend.processes(self.index)
        except nvml.DeviceError as exc:
            self.reason = f"NVML failed during the probe: {exc.reason}"
            self._backend = None
            return {}
        own: int | None = None
        if procs is not nvml.NOT_AVAILABLE:
            for p in procs:
                if p.pid == os.getpid():
                    own = nvml.or_none(p.used_memory_bytes)
        return {"nvml_device_used_bytes": nvml.or_none(state.memory_used_bytes),
                "nvml_process_used_bytes": own}

    def describe(self) -> MemoryNvml:
        return MemoryNvml(available=self.reason is None, reason=self.reason, index=self.index,
                          mapping_note=self.mapping_note, total_bytes=self.total_bytes,
                          baseline_device_used_bytes=self.baseline_used_bytes)


def _first_line(exc: BaseException) -> str:
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def _reading(tf: Any, device: str, step: int, phase: str, held_mb: int, view: NvmlView | None,
             t0: float) -> MemoryReading:
    info = tf.config.experimental.get_memory_info(device)
    nvml_now = view.read() if view is not None else {}
    return MemoryReading(step, phase, held_mb, round(time.monotonic() - t0, 3),
                         int(info["current"]), int(info["peak"]),
                         nvml_now.get("nvml_device_used_bytes"),
                         nvml_now.get("nvml_process_used_bytes"))


def allocation_pattern(tf: Any, device: str, steps: int, step_mb: int,
                       view: NvmlView | None) -> AllocationPattern:
    """Grow a set of ``step_mb`` MiB tensors on ``device`` one per step, then release it."""
    t0 = time.monotonic()
    readings = [_reading(tf, device, 0, "initialised", 0, view, t0)]
    held: list[Any] = []
    error: AllocationError | None = None
    with tf.device(device):
        for step in range(1, steps + 1):
            try:
                held.append(tf.fill([step_mb * MIB // 4], 1.0))  # float32: step_mb MiB
            except tf.errors.ResourceExhaustedError as exc:
                error = AllocationError(step, type(exc).__name__, _first_line(exc))
                break
            readings.append(_reading(tf, device, step, "grow", step_mb * len(held), view, t0))
    held.clear()
    readings.append(_reading(tf, device, len(readings), "released", 0, view, t0))
    return AllocationPattern(device, steps, step_mb, readings, error)


def past_limit(tf: Any, device: str, limit_mb: int, step_mb: int) -> PastLimit:
    """Allocate one tensor larger than the limit; it must fail inside this process."""
    size_mb = limit_mb + step_mb
    try:
        with tf.device(device):
            big = tf.fill([size_mb * MIB // 4], 1.0)
        del big
    except tf.errors.OpError as exc:  # ResourceExhaustedError, or what went wrong instead
        return PastLimit(size_mb, True, type(exc).__name__, _first_line(exc))
    return PastLimit(size_mb, False)


def still_works(tf: Any, device: str) -> bool:
    with tf.device(device):
        return float(tf.reduce_sum(tf.ones([1024]))) == 1024.0


def modify_after_init(tf: Any, gpus: list[Any]) -> list[ConfigAttempt]:
    """Initialise the devices with one op, then try to change their configuration."""
    float(tf.reduce_sum(tf.ones([4])))  # devices are initialised now
    attempts: list[tuple[str, Any]]
    if gpus:
        attempts = [
            ("tf.config.experimental.set_memory_growth(gpu, True)",
             lambda: tf.config.experimental.set_memory_growth(gpus[0], True)),
            ("tf.config.set_logical_device_configuration(gpu, "
             "[tf.config.LogicalDeviceConfiguration(memory_limit=1024)])",
             lambda: tf.config.set_logical_device_configuration(
                 gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=1024)])),
        ]
    else:
        cpu = tf.config.list_physical_devices("CPU")[0]
        attempts = [
            ("tf.config.set_logical_device_configuration(cpu, "
             "[tf.config.LogicalDeviceConfiguration()] * 2)",
             lambda: tf.config.set_logical_device_configuration(
                 cpu, [tf.config.LogicalDeviceConfiguration()] * 2)),
        ]
    out = []
    for api, call in attempts:
        try:
            call()
        except (RuntimeError, ValueError) as exc:
            out.append(ConfigAttempt(api, True, type(exc).__name__, _first_line(exc)))
        else:
            out.append(ConfigAttempt(api, False))
    return out


def run(config: dict[str, Any]) -> dict[str, Any]:
    cfg = MemoryConfig.from_dict(config)
    mode = cfg.mode
    if mode not in MODES:
        raise ValueError(f"unknown memory mode {mode!r}; one of {', '.join(MODES)}")
    inherited = os.environ.get(ENV_GROWTH)
    if mode != "growth_env" and inherited is not None:
        del os.environ[ENV_GROWTH]  # before TensorFlow reads it
    with nvml.opened() as backend:  # this child's NVML: opened and closed here
        view = NvmlView(backend)  # before TensorFlow: the baseline is the device without us
        return probe(cfg, view, inherited)


def probe(cfg: MemoryConfig, view: NvmlView, inherited: str | None) -> dict[str, Any]:
    """The mode's observations, with NVML's readings from ``view``."""
    mode, steps, step_mb = cfg.mode, cfg.steps, cfg.step_mb
    import tensorflow as tf

    gpus = tf.config.list_physical_devices("GPU")
    out = MemoryResult(
        mode=mode,
        gpu_available=bool(gpus),
        physical_gpus=[g.name for g in gpus],
        env={ENV_GROWTH: os.environ.get(ENV_GROWTH),
             "inherited_" + ENV_GROWTH: inherited,
             "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
             "CUDA_DEVICE_ORDER": os.environ.get("CUDA_DEVICE_ORDER")},
        nvml=view.describe(),
    )
    if mode == "modify_after_init":
        return replace(out, attempts=modify_after_init(tf, gpus)).to_dict()
    if not gpus:
        pattern = allocation_pattern(tf, "/CPU:0", steps, step_mb, None)
        return replace(out, pattern=pattern).to_dict()
    tf.config.set_visible_devices(gpus[:1], "GPU")
    limit_mb = cfg.memory_limit_mb or 0
    if mode == "limit" and limit_mb <= 0:
        raise ValueError("limit mode needs memory_limit_mb > 0")
    if mode == "growth":
        tf.config.experimental.set_memory_growth(gpus[0], True)
    elif mode == "limit":
        tf.config.set_logical_device_configuration(
            gpus[0], [tf.config.LogicalDeviceConfiguration(memory_limit=limit_mb)])
    tf.config.list_logical_devices()  # initialise the devices
    out = replace(out, memory_growth=tf.config.experimental.get_memory_growth(gpus[0]),
                  pattern=allocation_pattern(tf, "/GPU:0", steps, step_mb, view))
    if mode == "limit":
        out = replace(out, memory_limit_mb=limit_mb,
                      past_limit=past_limit(tf, "/GPU:0", limit_mb, step_mb),
                      alive_after=still_works(tf, "/GPU:0"),
                      after_past_limit=_reading(tf, "/GPU:0", -1, "after_past_limit", 0,
                                                view, time.monotonic()))
    return replace(out, nvml=view.describe()).to_dict()
