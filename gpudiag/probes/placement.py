"""Placement probe: where TensorFlow runs each op, what pinning does, what soft placement does.

Command-line equivalent of the log it captures: ``TF_CPP_MIN_LOG_LEVEL=0`` plus
``tf.debugging.set_log_device_placement(True)`` in a script; the log goes to stderr.

Parts, each after a ``GPUDIAG-SECTION <name>`` line on stderr so the parent can parse
the placement log part by part:

- ``workload``: constants, matmul, add eagerly, and a tf.function with a few ops, all
  unpinned: where TensorFlow puts work by default.
- ``pinned``: one matmul pinned to each device (host and compute devices) eagerly and
  inside a tf.function (node ``pinned_<i>``).
- ``invalid-soft-off``: soft placement off, a matmul pinned to one GPU past the last:
  TensorFlow must raise InvalidArgumentError.
- ``soft-on``: the same pin with soft placement on: the op falls back to another device.
- ``no-gpu-kernel``: with a GPU, a string op (no GPU kernel) pinned to GPU:0 falls back
  to the CPU. Not run without a GPU.
- ``multitower``: the classic multi-tower example: the same matmul on every compute
  device (``tower_<i>/MatMul``), summed with add_n on the host, checked against numpy.
"""

from __future__ import annotations

import sys
from typing import Any

from gpudiag.devnames import device_name, short_device
from gpudiag.probes.devices import setup
from gpudiag.readers.placementlog import SECTION_MARKER
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.results import (
    InvalidPinResult,
    MultitowerResult,
    NoKernelPin,
    Pin,
    PinnedResult,
    PlacementConfig,
    PlacementResult,
    SoftPinResult,
    Workload,
)

MATRIX_SIZE = 64


def _section(name: str) -> None:
    sys.stdout.flush()
    print(f"{SECTION_MARKER}{name}", file=sys.stderr, flush=True)


def run(config: dict[str, Any]) -> dict[str, Any]:
    cfg = PlacementConfig.from_dict(config)
    dev = setup(
        cfg.n_devices,
        virtual_gpus=cfg.virtual_gpus,
        memory_limit_mb=cfg.memory_limit_mb,
        log_device_placement=True,
    )
    import numpy as np
    import tensorflow as tf

    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((MATRIX_SIZE, MATRIX_SIZE)).astype(np.float32)
    b_np = rng.standard_normal((MATRIX_SIZE, MATRIX_SIZE)).astype(np.float32)
    n_gpus = len(tf.config.list_logical_devices("GPU"))

    a, b, workload = _workload(a_np, b_np)
    pinned = _pinned(a, b, [dev.host_device, *dev.compute_devices])
    invalid = device_name("GPU", n_gpus)
    invalid_soft_off = _invalid_soft_off(a, b, invalid)
    soft_on = _soft_on(a, b, invalid)
    no_gpu_kernel = _no_gpu_kernel(n_gpus)
    multitower = _multitower(a_np, b_np, a, b, dev)
    _section("end")
    return PlacementResult(
        setup=dev.to_dict(), tf_version=tf.__version__,
        workload=workload,
        pinned=pinned, invalid_soft_off=invalid_soft_off, soft_on=soft_on,
        no_gpu_kernel=no_gpu_kernel,
        multitower=multitower,
    ).to_dict()


def _workload(a_np: Any, b_np: Any) -> tuple[Any, Any, Workload]:
    """Section ``workload``: unpinned eager ops and a tf.function; the constants a and b
    (made here, so that their placement is logged in this section) and where work went."""
    import tensorflow as tf

    _section("workload")
    a = tf.constant(a_np, name="a")
    b = tf.constant(b_np, name="b")
    c = tf.matmul(a, b)
    d = tf.add(c, a)

    @tf.function
    def probe_fn(x: Any, y: Any) -> Any:
        z = tf.matmul(x, y, name="probe_matmul")
        z = tf.nn.relu(tf.add(z, x, name="probe_add"), name="probe_relu")
        return tf.reduce_sum(z, name="probe_sum")

    total = probe_fn(a, b)
    return a, b, Workload(short_device(d.device), short_device(total.device))


def _pinned(a: Any, b: Any, targets: list[str]) -> PinnedResult:
    """Section ``pinned``: one matmul pinned to each target, eagerly and in a tf.function."""
    import tensorflow as tf

    _section("pinned")
    eager_pins: list[Pin] = []
    for target in targets:
        with tf.device(target):
            r = tf.matmul(a, b)
        eager_pins.append(Pin(target, short_device(r.device)))

    @tf.function
    def pinned_fn(x: Any, y: Any) -> list[Any]:
        results = []
        for i, target in enumerate(targets):
            with tf.device(target):
                results.append(tf.matmul(x, y, name=f"pinned_{i}"))
        return results

    pinned_fn(a, b)
    return PinnedResult(targets, eager_pins, {f"pinned_{i}": t for i, t in enumerate(targets)})


def _invalid_soft_off(a: Any, b: Any, invalid: str) -> InvalidPinResult:
    """Section ``invalid-soft-off``: a pin past the last GPU with soft placement off."""
    import tensorflow as tf

    _section("invalid-soft-off")
    tf.config.set_soft_device_placement(False)
    try:
        with tf.device(invalid):
            r = tf.matmul(a, b)
        return InvalidPinResult(invalid, raised=False, actual=short_device(r.device))
    except tf.errors.InvalidArgumentError as exc:
        return InvalidPinResult(invalid, raised=True, error_type=type(exc).__name__,
                                message=exc.message.strip())
    finally:
        tf.config.set_soft_device_placement(True)


def _soft_on(a: Any, b: Any, invalid: str) -> SoftPinResult:
    """Section ``soft-on``: the same pin with soft placement on."""
    import tensorflow as tf

    _section("soft-on")
    with tf.device(invalid):
        r = tf.matmul(a, b)
    return SoftPinResult(invalid, short_device(r.device), tf.config.get_soft_device_placement())


def _no_gpu_kernel(n_gpus: int) -> NoKernelPin | None:
    """Section ``no-gpu-kernel``: a string op pinned to GPU:0 (None without a GPU)."""
    import tensorflow as tf

    _section("no-gpu-kernel")
    if not n_gpus:
        return None
    gpu0 = device_name("GPU", 0)
    with tf.device(gpu0):
        s = tf.strings.as_string(tf.constant([1, 2, 3]))
    return NoKernelPin("AsString", gpu0, short_device(s.device))


def _multitower(a_np: Any, b_np: Any, a: Any, b: Any, dev: DeviceSetup) -> MultitowerResult:
    """Section ``multitower``: the same matmul on every compute device (a @ b; a_np @ b_np
    is the numpy check), summed on the host."""
    import numpy as np
    import tensorflow as tf

    _section("multitower")

    @tf.function
    def multitower(x: Any, y: Any) -> Any:
        parts = []
        for i, target in enumerate(dev.compute_devices):
            with tf.name_scope(f"tower_{i}"), tf.device(target):
                parts.append(tf.matmul(x, y))
        with tf.device(dev.host_device):
            return tf.add_n(parts, name="tower_sum")

    value = multitower(a, b).numpy()
    expected = len(dev.compute_devices) * (a_np.astype(np.float64) @ b_np.astype(np.float64))
    err = float(np.max(np.abs(value - expected)) / max(1.0, float(np.max(np.abs(expected)))))
    return MultitowerResult(dev.compute_devices, dev.host_device, err, err < 1e-4)
