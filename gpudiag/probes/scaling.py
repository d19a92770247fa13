"""`gpudiag scaling`'s child for one device count: every strategy on the same devices.

TensorFlow's device configuration is per process and frozen once devices are
initialised, so a device count is the natural unit of a child: it imports TensorFlow and
sets up ``n_devices`` devices once (gpudiag.probes.devices.setup), loads the data once,
then trains each strategy of ``strategies`` one after the other
(gpudiag/probes/training.py's ``train_on``, each into its own TensorBoard run
``<strategy>-<n>dev/``), and, in the largest count's child (``allreduce`` set; the first
child runs it only when the largest count is its own), sweeps the all-reduce sizes
after the training (gpudiag/probes/allreduce.py's ``sweep``), so no measurement of one
overlaps another's.

The first child (one device) also resolves and checks the largest count asked for
(``check_max``) before it sets up its own device: asking for more GPUs than exist ends
there, before any training, with the same one-line errors as the device set-up (exit 2
in the parent).

A strategy that raises is recorded (its error type and message) and the next one runs;
bad input (UsageError: the data set, the devices) ends the child, as it would end every
strategy alike. Config: a gpudiag.records.training.CountConfig; returns a CountResult,
with the wall-clock epochs of entry and of TensorFlow's import and the seconds of the
device set-up, the data load, each strategy's build and the sweep, for the parent's
timing (gpudiag.scaling.timing).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.probes.allreduce import check_count, sweep
from gpudiag.probes.devices import setup
from gpudiag.probes.training import train_on
from gpudiag.records.devices import DEFAULT_VIRTUAL_DEVICES, DeviceRequestError
from gpudiag.records.training import CountConfig, CountResult, StrategyOutcome


def resolve_max(tf: Any, requested: int | None, virtual_gpus: int | None,
                max_virtual: int) -> int:
    """The largest device count the run will use (``requested``: --max-gpus, None: every
    GPU, the split, or the default virtual CPU devices), checked as the device set-up
    would check it, without setting anything up."""
    check_count(tf, requested, virtual_gpus, max_virtual)
    gpus = tf.config.list_physical_devices("GPU")
    if gpus and virtual_gpus:
        n = virtual_gpus if requested is None else requested
        limit, why = virtual_gpus, (f"{n} devices asked for but --virtual-gpus splits GPU:0 "
                                    f"into {virtual_gpus}")
    elif gpus:
        n = len(gpus) if requested is None else requested
        limit, why = len(gpus), (f"{n} GPUs asked for but TensorFlow sees {len(gpus)}; "
                                 "use --virtual-gpus N to split one GPU")
    else:
        n = requested if requested is not None else (virtual_gpus or DEFAULT_VIRTUAL_DEVICES)
        limit = virtual_gpus or n
        why = (f"{n} devices asked for but --virtual-gpus {virtual_gpus} makes "
               f"{virtual_gpus} virtual CPU devices here (no GPU); ask for at most "
               f"{virtual_gpus}")
    if n > limit:
        raise DeviceRequestError(why)
    return n


def run_count(cfg: CountConfig) -> CountResult:
    entered_at = time.time()
    import tensorflow as tf

    tf_imported_at = time.time()
    t0 = time.perf_counter()
    max_devices = (resolve_max(tf, cfg.max_devices, cfg.virtual_gpus,
                               cfg.max_virtual_cpu_devices) if cfg.check_max else None)
    dev = setup(cfg.n_devices, virtual_gpus=cfg.virtual_gpus, memory_limit_mb=cfg.memory_limit_mb)
    t1 = time.perf_counter()
    from gpudiag.train import data as data_mod

    w = cfg.workload
    data = data_mod.load(Path(w.data) if w.data else None)
    t2 = time.perf_counter()
    outcomes = []
    for index, strategy in enumerate(cfg.strategies):
        start = time.perf_counter()
        try:
            result = train_on(dev, cfg.training_config(index), data)
        except (UsageError, DeviceRequestError):
            raise
        except Exception as exc:  # the next strategy still runs; the parent reports this one
            first = str(exc).strip().splitlines()
            outcomes.append(StrategyOutcome(strategy, None, type(exc).__name__,
                                            first[0] if first else type(exc).__name__))
            continue
        build_s = time.perf_counter() - start - result.train.wall_s
        outcomes.append(StrategyOutcome(strategy, result, build_s=build_s))
    t3 = time.perf_counter()
    allreduce, allreduce_error = None, None
    swept = cfg.allreduce is not None and (max_devices is None or max_devices == cfg.n_devices)
    if cfg.allreduce is not None and swept:
        try:
            allreduce = sweep(dev, cfg.allreduce)
        except Exception as exc:  # the training results above still go back
            allreduce_error = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    return CountResult(setup=dev, max_devices=max_devices, outcomes=outcomes,
                       allreduce=allreduce, allreduce_error=allreduce_error,
                       entered_at=entered_at,
                       tf_imported_at=tf_imported_at, device_setup_s=t1 - t0,
                       data_load_s=t2 - t1,
                       allreduce_s=time.perf_counter() - t3 if swept else 0.0)


def run(config: dict[str, Any]) -> dict[str, Any]:
    """gpudiag.procs.child's entry point: config.json in, result.json's ``result`` out."""
    return run_count(CountConfig.from_dict(config)).to_dict()
