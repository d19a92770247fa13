"""Collective bandwidth probe: all-reduce message sizes across the scaling devices.

Like nccl-tests' ``all_reduce_perf -b 1M -e 256M -f 2`` but on TensorFlow's own
cross-device ops, the ones MirroredStrategy reduces gradients with:
``tf.distribute.NcclAllReduce`` on GPUs, ``tf.distribute.ReductionToOneDevice`` on CPU
devices. For each size, a float32 tensor of that many bytes lives on every device (a
mirrored variable); a ``tf.function`` runs ``ReplicaContext.all_reduce(SUM, ...)`` on all
replicas; the time is the median wall time of one call (dispatch and the fetch of one
element of the result included, as a training step would pay them).

Reported per size, with nccl-tests' definitions (n devices, S bytes, t seconds):
algorithm bandwidth ``algbw = S / t``; bus bandwidth ``busbw = algbw * 2 (n - 1) / n``,
the per-link rate a ring all-reduce needs, comparable across n.

On virtual CPU devices every "device" is the same host memory: the numbers are host
memory-bandwidth numbers, not interconnect numbers (the parent's report says so).

Config: a gpudiag.records.training.AllreduceConfig (n_devices None: every GPU, the
--virtual-gpus split, or the default number of virtual CPU devices). This probe runs
first in `gpudiag scaling`, so it is also the device check: asking for more GPUs than
exist raises DeviceRequestError (exit 2 in the parent). Returns an AllreduceResult: the
device setup, the cross-device ops used, and one row per size.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.probes.devices import setup
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import AllreduceConfig, AllreduceResult, AllreduceRow


def bus_bandwidth(algbw: float, n: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce over ``n`` devices."""
    return algbw * 2 * (n - 1) / n if n > 1 else 0.0


def run(config: dict[str, Any]) -> dict[str, Any]:
    """gpudiag.procs.child's entry point: config.json in, result.json's ``result`` out."""
    return measure(AllreduceConfig.from_dict(config)).to_dict()


def check_count(tf: Any, requested: int | None, virtual_gpus: int | None,
                max_virtual: int) -> None:
    """Without a GPU, at most ``max_virtual`` virtual CPU devices are made (exit 2 in the
    parent); before any device is set up."""
    if not tf.config.list_physical_devices("GPU"):
        made = requested if requested is not None else virtual_gpus
        if made is not None and made > max_virtual:
            raise UsageError(
                f"{made} devices asked for, but there is no GPU and at most {max_virtual} "
                "virtual CPU devices are made (they share the same cores)"
            )


def measure(cfg: AllreduceConfig) -> AllreduceResult:
    """Set up the devices (the device check) and sweep the sizes."""
    import tensorflow as tf

    check_count(tf, cfg.n_devices, cfg.virtual_gpus, cfg.max_virtual_cpu_devices)
    dev = setup(cfg.n_devices, virtual_gpus=cfg.virtual_gpus, memory_limit_mb=cfg.memory_limit_mb)
    return sweep(dev, cfg)


def plateaued(busbw: list[float], sizes: int, gain: float) -> bool:
    """The last ``sizes`` bus bandwidths none more than ``gain`` above the best before
    them: larger messages are not going to show more (``sizes`` 0: never)."""
    if sizes < 1 or len(busbw) <= sizes:
        return False
    best_before = max(busbw[:-sizes])
    return all(b <= best_before * (1 + gain) for b in busbw[-sizes:])


def sweep(dev: DeviceSetup, cfg: AllreduceConfig) -> AllreduceResult:
    """The sizes of ``cfg`` over ``dev``'s compute devices, smallest first, until the bus
    bandwidth has plateaued (``cfg.plateau_sizes`` sizes in a row no better than
    ``plateau_gain`` above the best before them) or the largest size ran."""
    import tensorflow as tf

    n = len(dev.compute_devices)
    on_gpu = dev.kind in ("gpu", "virtual-gpu")
    cross_ops = tf.distribute.NcclAllReduce() if on_gpu else tf.distribute.ReductionToOneDevice()
    strategy = tf.distribute.MirroredStrategy(dev.compute_devices, cross_device_ops=cross_ops)
    rows: list[AllreduceRow] = []
    plateau_after: int | None = None
    sizes = cfg.sizes_bytes if n > 1 else []  # one device: nothing to reduce across
    for size in sizes:
        rows.append(_one_size(tf, strategy, n, size, cfg))
        if size != sizes[-1] and plateaued([r.busbw_bytes_per_s for r in rows],
                                           cfg.plateau_sizes, cfg.plateau_gain):
            plateau_after = size
            break
    return AllreduceResult(setup=dev, n_devices=n, cross_device_ops=type(cross_ops).__name__,
                           rows=rows, plateau_after_bytes=plateau_after)


def _one_size(tf: Any, strategy: Any, n: int, size: int, cfg: AllreduceConfig) -> AllreduceRow:
    """One message size: a warm-up call, then timed calls (median)."""
    elems = max(1, size // 4)
    with strategy.scope():
        buf = tf.Variable(tf.ones([elems], tf.float32), name=f"buf_{size}")

    def replica_fn(v: Any = buf) -> Any:
        ctx = tf.distribute.get_replica_context()
        return ctx.all_reduce(tf.distribute.ReduceOp.SUM, v.read_value())[:1]

    @tf.function
    def allreduce(fn: Any = replica_fn) -> Any:
        return strategy.run(fn)

    def once() -> float:
        t0 = time.perf_counter()
        out = allreduce()
        first = strategy.experimental_local_results(out)
        values = [float(t.numpy()[0]) for t in first]  # waits for every replica
        dt = time.perf_counter() - t0
        if any(v != float(n) for v in values):
            raise RuntimeError(f"all-reduce of ones over {n} devices gave {values}")
        return dt

    once()  # trace and warm up
    times: list[float] = []
    spent = 0.0
    while len(times) < cfg.max_iters and (len(times) < cfg.min_iters
                                          or spent < cfg.max_s_per_size):
        times.append(once())
        spent += times[-1]
    t = statistics.median(times)
    algbw = size / t
    return AllreduceRow(size_bytes=size, iters=len(times), time_s=t, algbw_bytes_per_s=algbw,
                        busbw_bytes_per_s=bus_bandwidth(algbw, n))
