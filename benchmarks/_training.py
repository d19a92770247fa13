"""Shared set-up of the training benchmarks: devices, data, and interleaved timing.

Both benchmarks time the step exactly as `gpudiag scaling` runs it
(gpudiag.train.loop.run_one_step: the step, the fetch of its results, the buffered
scalars, whose writes fall inside the timed blocks)
for two trainers on the same devices, in adjacent blocks whose order flips every round,
so slow drift of a shared machine hits both alike. The figure per side is the median
over rounds of the block's wall time per step; the ratio is the median over rounds of
the per-round ratio.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def setup_devices(n: int) -> Any:
    """GPUs when there are, else n virtual CPU devices (before TensorFlow initialises)."""
    from gpudiag.probes.devices import setup

    return setup(n)


@dataclass(frozen=True)
class Side:
    name: str
    trainer: Any
    iterator: Any
    writer: Any
    scalars: Any  # gpudiag.train.loop.StepScalars, or None when scalars are off


def make_side(name: str, trainer: Any, global_batch: int) -> Side:
    import tensorflow as tf

    from gpudiag.train import data

    probe = data.synthetic(n_train=4096, n_eval=16)
    iterator = trainer.make_iterator(probe.train_dataset(global_batch))
    from gpudiag.train.loop import step_scalars

    logdir = Path(tempfile.mkdtemp(prefix=f"gpudiag-bench-{name}-"))
    writer = tf.summary.create_file_writer(str(logdir))
    with writer.as_default():
        scalars = step_scalars(trainer)
    return Side(name, trainer, iterator, writer, scalars)


def run_block(side: Side, steps: int, first_index: int) -> float:
    """Wall seconds per step over ``steps`` steps (the timing scalars included)."""
    from gpudiag.train.loop import run_one_step

    with side.writer.as_default():
        t0 = time.perf_counter()
        for i in range(steps):
            run_one_step(side.trainer, side.iterator, first_index + i, scalars=side.scalars)
        side.writer.flush()
        return (time.perf_counter() - t0) / steps


def compare(sides: list[Side], *, rounds: int, block: int, warmup: int,
            report: Callable[[str], None] = print) -> dict[str, list[float]]:
    """Seconds per step of each side, per round; the order rotates every round."""
    for side in sides:
        run_block(side, warmup, 0)
    per: dict[str, list[float]] = {side.name: [] for side in sides}
    index = warmup
    for r in range(rounds):
        k = r % len(sides)
        order = sides[k:] + sides[:k]
        if r % 2:
            order = order[::-1]
        for side in order:
            per[side.name].append(run_block(side, block, index))
        index += block
        report(f"round {r + 1:2d}: " + "   ".join(
            f"{name} {values[-1] * 1e3:7.3f} ms/step" for name, values in per.items()))
    return per


def median_ratio(per: dict[str, list[float]], a: str, b: str) -> float:
    """Median over rounds of a's step time / b's (each round's pair ran back to back)."""
    return statistics.median(x / y for x, y in zip(per[a], per[b], strict=True))


def median_ratio_to_mean(per: dict[str, list[float]], a: str, controls: list[str]) -> float:
    """Median over rounds of a's step time / the mean of the ``controls``' (identical
    trainers) in that round: two controls halve what one control's own luck adds."""
    return statistics.median(
        x / statistics.fmean(ys) for x, *ys in zip(per[a], *(per[c] for c in controls),
                                                   strict=True))


def median_s(per: dict[str, list[float]], name: str) -> float:
    return statistics.median(per[name])
