"""Training probe: one scaling configuration (strategy x device count) in its own child.

Configures ``n_devices`` compute devices (gpudiag.probes.devices.setup: GPUs, one GPU split, or
virtual CPU devices), loads the data (synthetic or ``workload.data``), trains the probe
model with the chosen strategy (``towers``, ``mirrored`` or ``keras``) for
``workload.steps`` steps, and writes one TensorBoard run directory (``logdir``): per-step
scalars, histograms every ``histogram_every`` steps, the moving-average evaluation, a
checkpoint and a profiler trace of ``profile_steps`` steps after the warm-up (tags and
names: gpudiag/layout/__init__.py).

The script-level equivalent is TensorFlow's cifar10_multi_gpu_train / the distributed
training guide's custom loop, with ``tf.profiler.experimental`` around a few steps.

Config: a gpudiag.records.training.TrainingConfig; with ``progress`` on, one
``layout.step_line`` per step on stdout for the parent. Returns a TrainingResult (the
device setup, the data description, the model's gradient bytes and the training
result). No verdicts here.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpudiag import layout
from gpudiag.probes.devices import setup
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import TrainingConfig, TrainingResult

if TYPE_CHECKING:
    from gpudiag.train.data import ProbeData


def _print_progress(total: int) -> Any:
    """``layout.step_line`` on stdout after every step, which the parent follows."""

    def on_step(index: int, loss: float, step_s: float) -> None:
        print(layout.step_line(index + 1, total, loss), flush=True)

    return on_step


def train(cfg: TrainingConfig) -> TrainingResult:
    """One configuration in a child of its own (its devices set up here)."""
    from gpudiag.train import data as data_mod

    dev = setup(cfg.n_devices, virtual_gpus=cfg.virtual_gpus, memory_limit_mb=cfg.memory_limit_mb)
    w = cfg.workload
    return train_on(dev, cfg, data_mod.load(Path(w.data) if w.data else None))


def train_on(dev: DeviceSetup, cfg: TrainingConfig, data: ProbeData) -> TrainingResult:
    """One configuration on devices already set up (``dev``), on ``data``; several run
    one after the other in a count child (gpudiag/probes/scaling.py)."""
    from gpudiag.train import loop as loop_mod
    from gpudiag.train.datafile import check_batch
    from gpudiag.train.model import ModelTask, gradient_bytes, model_spec, param_shapes
    from gpudiag.train.summaries import Instrumentation
    from gpudiag.train.towers import TrainerOptions

    w = cfg.workload
    spec = model_spec(w.model)
    info = data.info
    devices = dev.compute_devices
    instr = Instrumentation(scalars=cfg.scalars, histogram_every=w.histogram_every,
                            ema_decay=w.ema_decay or None)
    global_batch = w.batch_per_device * len(devices)
    check_batch(info.n_train, global_batch, info.source)
    loop = loop_mod.LoopConfig(steps=w.steps, warmup_steps=w.warmup_steps,
                               profile_steps=w.profile_steps, logdir=Path(cfg.logdir),
                               checkpoint=cfg.checkpoint)
    dataset = data.train_dataset(global_batch, seed=w.seed)
    options = TrainerOptions(batch_per_device=w.batch_per_device,
                             learning_rate=w.learning_rate, momentum=w.momentum,
                             instrumentation=instr, seed=w.seed)
    task = ModelTask(spec, info.input_shape, info.num_classes)
    on_step = _print_progress(loop.steps) if cfg.progress else None
    if cfg.strategy == "keras":
        from gpudiag.train.keras_fit import train_keras

        result = train_keras(task, devices, dataset, data.eval_x, data.eval_y, loop, options,
                             on_step=on_step)
    else:
        trainer: Any
        if cfg.strategy == "towers":
            from gpudiag.train.towers import TowerTrainer

            trainer = TowerTrainer(task, devices, options, variables_on=w.variables_on)
        else:
            from gpudiag.train.mirrored import MirroredTrainer

            trainer = MirroredTrainer(task, devices, options)
        result = loop_mod.train(trainer, dataset, data.eval_x, data.eval_y, loop,
                                on_step=on_step)
    shapes = param_shapes(spec, info.input_shape, info.num_classes)
    return TrainingResult(
        setup=dev, data=info, model=spec.name,
        param_count=sum(math.prod(p.shape) for p in shapes),
        gradient_bytes=gradient_bytes(shapes),
        variables_on=w.variables_on if cfg.strategy == "towers" else "mirrored",
        batch_per_device=w.batch_per_device, train=result,
    )


def run(config: dict[str, Any]) -> dict[str, Any]:
    """gpudiag.procs.child's entry point: config.json in, result.json's ``result`` out."""
    return train(TrainingConfig.from_dict(config)).to_dict()
