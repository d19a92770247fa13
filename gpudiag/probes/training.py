"""Training probe: one scaling configuration (strategy x device count) in its own child.

Configures ``n_devices`` compute devices (gpudiag.devices.setup: GPUs, one GPU split, or
virtual CPU devices), loads the data (synthetic or ``data``), trains the probe model with
the chosen strategy (``towers``, ``mirrored`` or ``keras``) for ``steps`` steps, and
writes one TensorBoard run directory (``logdir``): per-step scalars, histograms every
``histogram_every`` steps, the moving-average evaluation, a checkpoint and a profiler
trace of ``profile_steps`` steps after the warm-up.

The script-level equivalent is TensorFlow's cifar10_multi_gpu_train / the distributed
training guide's custom loop, with ``tf.profiler.experimental`` around a few steps.

Config keys (all plain JSON): n_devices, strategy, model, batch_per_device, steps,
warmup_steps, profile_steps, learning_rate, momentum, ema_decay (null: off),
histogram_every (0: off), scalars, variables_on (cpu|device), data (path or null),
logdir, seed, checkpoint, virtual_gpus, memory_limit_mb, progress (print one
``GPUDIAG-STEP <step> <total> <loss>`` line per step on stdout for the parent).

Returns: the device setup, the data description, the model's gradient bytes and the
training result (gpudiag.train.loop.TrainResult as a dict). No verdicts here.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

from gpudiag.devices import setup

STRATEGIES = ("towers", "mirrored", "keras")

DEFAULTS: dict[str, Any] = {
    "n_devices": 1,
    "strategy": "towers",
    "model": "cnn-small",
    "batch_per_device": 32,
    "steps": 60,
    "warmup_steps": 10,
    "profile_steps": 5,
    "learning_rate": 0.05,
    "momentum": 0.9,
    "ema_decay": 0.99,
    "histogram_every": 100,
    "scalars": True,
    "variables_on": "cpu",
    "data": None,
    "seed": 0,
    "checkpoint": True,
    "virtual_gpus": None,
    "memory_limit_mb": 1024,
}


def _clean(value: Any) -> Any:
    """NaN and infinities as None, so the result stays strict JSON."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _print_progress(total: int) -> Any:
    """``GPUDIAG-STEP <step> <total> <loss>`` on stdout, which the parent follows."""

    def on_step(index: int, loss: float, step_s: float) -> None:
        print(f"GPUDIAG-STEP {index + 1} {total} {loss:.4f}", flush=True)

    return on_step


def run(config: dict[str, Any]) -> dict[str, Any]:
    cfg = {**DEFAULTS, **config}
    if cfg["strategy"] not in STRATEGIES:
        raise ValueError(f"unknown strategy {cfg['strategy']!r}")
    dev = setup(
        int(cfg["n_devices"]),
        virtual_gpus=cfg["virtual_gpus"],
        memory_limit_mb=int(cfg["memory_limit_mb"]),
    )
    from gpudiag.train import data as data_mod
    from gpudiag.train import loop as loop_mod
    from gpudiag.train.model import gradient_bytes, model_spec, param_shapes
    from gpudiag.train.summaries import Instrumentation

    spec = model_spec(cfg["model"])
    data = data_mod.load(Path(cfg["data"]) if cfg["data"] else None)
    info = data.info
    devices = dev.compute_devices
    instr = Instrumentation(
        scalars=bool(cfg["scalars"]),
        histogram_every=int(cfg["histogram_every"]),
        ema_decay=None if cfg["ema_decay"] is None else float(cfg["ema_decay"]),
    )
    batch = int(cfg["batch_per_device"])
    global_batch = batch * len(devices)
    loop = loop_mod.LoopConfig(
        steps=int(cfg["steps"]),
        warmup_steps=int(cfg["warmup_steps"]),
        profile_steps=int(cfg["profile_steps"]),
        logdir=Path(cfg["logdir"]),
        checkpoint=bool(cfg["checkpoint"]),
    )
    dataset = data.train_dataset(global_batch, seed=int(cfg["seed"]))
    common: dict[str, Any] = {
        "batch_per_device": batch,
        "learning_rate": float(cfg["learning_rate"]),
        "momentum": float(cfg["momentum"]),
        "instrumentation": instr,
        "seed": int(cfg["seed"]),
    }
    hparams = {
        "strategy": cfg["strategy"], "n_devices": len(devices), "device_kind": dev.kind,
        "model": spec.name, "batch_per_device": batch, "global_batch": global_batch,
        "learning_rate": common["learning_rate"], "momentum": common["momentum"],
        "variables_on": cfg["variables_on"], "data": info.source,
        "ema_decay": -1.0 if instr.ema_decay is None else instr.ema_decay,
        "histogram_every": instr.histogram_every,
    }
    on_step = _print_progress(loop.steps) if cfg.get("progress") else None
    if cfg["strategy"] == "keras":
        from gpudiag.train.keras_fit import train_keras

        result = train_keras(spec, info.input_shape, info.num_classes, devices, dataset,
                             data.eval_x, data.eval_y, loop, on_step=on_step, **common)
    else:
        trainer: Any
        if cfg["strategy"] == "towers":
            from gpudiag.train.towers import TowerTrainer

            trainer = TowerTrainer(spec, info.input_shape, info.num_classes, devices,
                                   variables_on=cfg["variables_on"], **common)
        else:
            from gpudiag.train.mirrored import MirroredTrainer

            trainer = MirroredTrainer(spec, info.input_shape, info.num_classes, devices,
                                      **common)
        result = loop_mod.train(trainer, dataset, data.eval_x, data.eval_y, loop,
                                hparams=hparams, on_step=on_step)
    shapes = param_shapes(spec, info.input_shape, info.num_classes)
    return _clean({
        "setup": dev.to_dict(),
        "data": {**asdict(info), "input_shape": list(info.input_shape)},
        "model": spec.name,
        "param_count": sum(math.prod(p.shape) for p in shapes),
        "gradient_bytes": gradient_bytes(shapes),
        "variables_on": cfg["variables_on"] if cfg["strategy"] == "towers" else "mirrored",
        "batch_per_device": batch,
        "train": result.to_dict(),
    })
