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
from gpudiag.records.training import AllreduceConfig, AllreduceResult, AllreduceRow


def bus_bandwidth(algbw: float, n: int) -> float:
    """nccl-tests' bus bandwidth of an all-reduce over ``n`` devices."""
    return algbw * 2 * (n - 1) / n if n > 1 else 0.0


def run(config: dict[str, Any]) -> dict[str, Any]:
    """gpudiag.procs.child's entry point: config.json in, result.json's ``result`` out."""
    return measure(AllreduceConfig.from_dict(config)).to_dict()


def measure(cfg: AllreduceConfig) -> AllreduceResult:
    import tensorflow as tf

    requested, max_virtual = cfg.n_devices, cfg.max_virtual_cpu_devices
    if not tf.config.list_physical_devices("GPU"):
        made = requested if requested is not None else cfg.virtual_gpus
        if made is not None and made > max_virtual:
            raise UsageError(
                f"{made} devices asked for, but there is no GPU and at most {max_virtual} "
                "virtual CPU devices are made (they share the same cores)"
            )
    dev = setup(requested, virtual_gpus=cfg.virtual_gpus, memory_limit_mb=cfg.memory_limit_mb)
    n = len(dev.compute_devices)
    on_gpu = dev.kind in ("gpu", "virtual-gpu")
    cross_ops = tf.distribute.NcclAllReduce() if on_gpu else tf.distribute.ReductionToOneDevice()
    strategy = tf.distribute.MirroredStrategy(dev.compute_devices, cross_device_ops=cross_ops)
    rows: list[AllreduceRow] = []
    for size in cfg.sizes_bytes if n > 1 else []:  # one device: nothing to reduce across
        elems = max(1, size // 4)
        with strategy.scope():
            buf = tf.Variable(tf.ones([elems], tf.float32), name=f"buf_{size}")

        def replica_fn(v: tf.Variable = buf) -> tf.Tensor:
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
        rows.append(AllreduceRow(size_bytes=size, iters=len(times), time_s=t,
                                 algbw_bytes_per_s=algbw,
                                 busbw_bytes_per_s=bus_bandwidth(algbw, n)))
        del buf
    return AllreduceResult(setup=dev, n_devices=n, cross_device_ops=type(cross_ops).__name__,
                           rows=rows)
