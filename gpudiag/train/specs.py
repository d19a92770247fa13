"""The probe models' sizes and weights as plain data (NumPy, no TensorFlow).

The CLI validates ``--model`` and the parent computes gradient sizes from here without
importing TensorFlow; gpudiag/train/model.py builds the TensorFlow model from the same
specs. ``param_shapes`` lists every weight in the order ``ProbeModel.forward`` takes
them; ``initial_values`` draws them (Glorot-uniform kernels, zero biases) from a seeded
NumPy generator, so every strategy starts from the same numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from gpudiag.errors import UsageError


@dataclass(frozen=True)
class ModelSpec:
    """Layer sizes of one selectable model (``--model``)."""

    name: str
    conv1_filters: int  # 0 means: no convolutions (MLP)
    conv2_filters: int
    hidden_units: int


MODEL_SPECS: dict[str, ModelSpec] = {
    "mlp": ModelSpec("mlp", 0, 0, 128),
    "cnn-small": ModelSpec("cnn-small", 8, 16, 64),
    "cnn": ModelSpec("cnn", 32, 64, 512),
}
DEFAULT_MODEL = "cnn-small"


@dataclass(frozen=True)
class ModelTask:
    """What a trainer builds: the model's layer sizes, one example's shape, the classes."""

    spec: ModelSpec
    input_shape: tuple[int, int, int]  # height, width, channels
    num_classes: int
KERNEL_SIZE = 5


def model_spec(name: str) -> ModelSpec:
    """The spec named by ``--model``; UsageError for an unknown name."""
    try:
        return MODEL_SPECS[name]
    except KeyError:
        known = ", ".join(MODEL_SPECS)
        raise UsageError(f"--model {name!r} is not one of: {known}") from None


@dataclass(frozen=True)
class ParamShape:
    name: str
    shape: tuple[int, ...]
    kind: str  # "kernel" or "bias"


def param_shapes(
    spec: ModelSpec, input_shape: tuple[int, int, int], num_classes: int
) -> list[ParamShape]:
    """Names and shapes of every weight, in the order ``forward`` takes them."""
    height, width, channels = input_shape
    shapes: list[ParamShape] = []
    if spec.conv1_filters:
        c1, c2 = spec.conv1_filters, spec.conv2_filters
        k = KERNEL_SIZE
        shapes += [
            ParamShape("conv1/kernel", (k, k, channels, c1), "kernel"),
            ParamShape("conv1/bias", (c1,), "bias"),
            ParamShape("conv2/kernel", (k, k, c1, c2), "kernel"),
            ParamShape("conv2/bias", (c2,), "bias"),
        ]
        # two 'SAME' 2x2 max-pools with stride 2
        flat = _pooled(_pooled(height)) * _pooled(_pooled(width)) * c2
    else:
        flat = height * width * channels
    shapes += [
        ParamShape("dense/kernel", (flat, spec.hidden_units), "kernel"),
        ParamShape("dense/bias", (spec.hidden_units,), "bias"),
        ParamShape("logits/kernel", (spec.hidden_units, num_classes), "kernel"),
        ParamShape("logits/bias", (num_classes,), "bias"),
    ]
    return shapes


def _pooled(size: int) -> int:
    """Output size of a 'SAME' max-pool with window 2 and stride 2."""
    return math.ceil(size / 2)


def initial_values(shapes: Sequence[ParamShape], seed: int) -> list[np.ndarray]:
    """Glorot-uniform kernels and zero biases, deterministic for a seed."""
    rng = np.random.default_rng(seed)
    values = []
    for p in shapes:
        if p.kind == "bias":
            values.append(np.zeros(p.shape, np.float32))
            continue
        receptive = int(np.prod(p.shape[:-2])) if len(p.shape) > 2 else 1
        fan_in, fan_out = p.shape[-2] * receptive, p.shape[-1] * receptive
        limit = np.sqrt(6.0 / (fan_in + fan_out))
        values.append(rng.uniform(-limit, limit, p.shape).astype(np.float32))
    return values


def gradient_bytes(shapes: Sequence[ParamShape]) -> int:
    """Bytes of one full float32 gradient: what an all-reduce per step has to move."""
    return int(sum(4 * int(np.prod(p.shape)) for p in shapes))
