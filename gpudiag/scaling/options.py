"""What `gpudiag scaling` was asked to do, checked once, before any run directory exists.

The defaults are defined once: the workload's in gpudiag.records.training.Workload (shared
with the training child), the rest here in ScalingOptions; the CLI's option defaults
read both. Light to import (the CLI imports it for ``--help``): the model table and the
data-file check are imported only by ``check``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag.errors import UsageError
from gpudiag.records.devices import DEFAULT_VIRTUAL_GPU_MEMORY_MB
from gpudiag.records.training import (
    DEFAULT_ALLREDUCE_MAX_MB,
    DEFAULT_ALLREDUCE_MIN_MB,
    MAX_PROFILE_STEPS,
    STRATEGIES,
    VARIABLES_ON,
    AllreduceConfig,
    TrainingConfig,
    Workload,
    allreduce_sizes,
)

DEFAULT_STRATEGIES = ("towers", "mirrored")


@dataclass(frozen=True)
class ScalingOptions:
    """Everything `gpudiag scaling` was asked to do (validated by ``check``)."""

    workload: Workload = field(default_factory=Workload)
    max_gpus: int | None = None  # None: every GPU (without one, 2 virtual CPU devices)
    strategies: tuple[str, ...] = DEFAULT_STRATEGIES
    virtual_gpus: int | None = None
    memory_limit_mb: int = DEFAULT_VIRTUAL_GPU_MEMORY_MB
    allreduce_min_mb: float = DEFAULT_ALLREDUCE_MIN_MB
    allreduce_max_mb: float = DEFAULT_ALLREDUCE_MAX_MB
    timeout_s: float = 300.0  # per child process

    def training_config(self, strategy: str, n_devices: int, logdir: Path) -> TrainingConfig:
        return TrainingConfig(strategy=strategy, n_devices=n_devices, logdir=str(logdir),
                              workload=self.workload, virtual_gpus=self.virtual_gpus,
                              memory_limit_mb=self.memory_limit_mb, progress=True)

    def allreduce_config(self) -> AllreduceConfig:
        return AllreduceConfig(
            sizes_bytes=allreduce_sizes(self.allreduce_min_mb, self.allreduce_max_mb),
            n_devices=self.max_gpus, virtual_gpus=self.virtual_gpus,
            memory_limit_mb=self.memory_limit_mb)

    def to_dict(self) -> dict[str, Any]:
        return {"workload": self.workload.to_dict(), "max_gpus": self.max_gpus,
                "strategies": list(self.strategies), "virtual_gpus": self.virtual_gpus,
                "memory_limit_mb": self.memory_limit_mb,
                "allreduce_min_mb": self.allreduce_min_mb,
                "allreduce_max_mb": self.allreduce_max_mb, "timeout_s": self.timeout_s}


def parse_strategies(text: str) -> tuple[str, ...]:
    """``towers,mirrored`` -> ("towers", "mirrored"); UsageError for unknown names."""
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise UsageError("--strategy needs at least one of: " + ", ".join(STRATEGIES))
    bad = [n for n in names if n not in STRATEGIES]
    if bad:
        raise UsageError(f"--strategy {bad[0]!r} is not one of: {', '.join(STRATEGIES)}")
    return tuple(dict.fromkeys(names))


def device_counts(max_devices: int) -> list[int]:
    """1, 2, 4 ... (powers of two below the maximum), then the maximum itself."""
    counts, n = [], 1
    while n < max_devices:
        counts.append(n)
        n *= 2
    return [*counts, max_devices]


def check_steps(w: Workload) -> None:
    """Some steps must be timed: more than the warm-up and the profiled ones (exit 2)."""
    if w.steps <= w.warmup_steps + w.profile_steps:
        raise UsageError(
            f"--steps {w.steps} leaves no timed steps after {w.warmup_steps} "
            f"warm-up and {w.profile_steps} profiled steps; use more --steps"
        )


def check(options: ScalingOptions) -> None:
    """Reject bad combinations with a one-line UsageError (exit 2). The CLI calls it once,
    before the run directory is made; ``commands.scaling.run`` expects checked options."""
    from gpudiag.train.datafile import check_data_file
    from gpudiag.train.specs import model_spec

    w = options.workload
    if options.max_gpus is not None and options.max_gpus < 1:
        raise UsageError(f"--max-gpus must be at least 1, got {options.max_gpus}")
    model_spec(w.model)  # raises the UsageError naming the choices
    if not 0 <= w.profile_steps <= MAX_PROFILE_STEPS:
        raise UsageError(f"--profile-steps must be 0..{MAX_PROFILE_STEPS}, got {w.profile_steps}")
    check_steps(w)
    if w.variables_on not in VARIABLES_ON:
        raise UsageError(f"--variables-on {w.variables_on!r} is not one of: "
                         + ", ".join(VARIABLES_ON))
    if not 0 <= w.ema_decay < 1:
        raise UsageError(f"--ema-decay must be in [0, 1), got {w.ema_decay:g}")
    if not 0 < options.allreduce_min_mb <= options.allreduce_max_mb:
        raise UsageError("--allreduce-min-mb must be > 0 and at most --allreduce-max-mb")
    if w.data is not None:
        check_data_file(Path(w.data))
