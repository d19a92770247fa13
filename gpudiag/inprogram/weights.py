"""Did the weights move? A cheap fingerprint of a model's trainable variables.

Per variable: the sum and the sum of squares of its values (float64) and its size. Two
fingerprints of the same variables are equal exactly when no update reached them (an
update that changes a weight changes its sums, short of a coincidence gpudiag ignores).
Taken twice per step source (after the first step or at the start of ``fit``, and at the
end): a device-to-host copy of the weights each time, never per step.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

MAX_VARIABLES = 256


def track(variables: Iterable[Any]) -> list[weakref.ref[Any]]:
    seen: set[int] = set()
    refs = []
    for v in variables:
        if id(v) in seen:
            continue
        seen.add(id(v))
        try:
            refs.append(weakref.ref(v))
        except TypeError:
            continue
        if len(refs) >= MAX_VARIABLES:
            break
    return refs


def bytes_by_device(variables: Iterable[Any]) -> dict[str, int] | None:
    """The variables' sizes in bytes, summed per device they live on (each variable once);
    None when one has a shape not fully known. Under MirroredStrategy each replica's device
    holds a copy: one device's sum is the gradient bytes one replica all-reduces per step."""
    seen: set[int] = set()
    out: dict[str, int] = {}
    for v in variables:
        if id(v) in seen:
            continue
        seen.add(id(v))
        try:  # a variable of another kind: no number rather than a lost "function" event
            elements = v.shape.num_elements()
            size = int(v.dtype.size)
        except Exception:
            return None
        if elements is None:
            return None
        device = str(getattr(v, "device", "") or "")
        out[device] = out.get(device, 0) + int(elements) * size
    return out


def logical_bytes(variables: Iterable[Any]) -> int | None:
    """The bytes of a Keras model's trainable weights, each logical weight once (under
    MirroredStrategy: one replica's copy); None when a size or dtype cannot be read."""
    import numpy as np

    total = 0
    try:
        for w in variables:
            dtype = w.dtype
            itemsize = np.dtype(dtype).itemsize if isinstance(dtype, str) else int(dtype.size)
            total += int(np.prod(tuple(w.shape), dtype=np.int64)) * itemsize
    except Exception:
        return None
    return total


def fingerprint(refs: list[weakref.ref[Any]]) -> list[list[float]] | None:
    """[[sum, sum of squares, size], ...] per variable still alive; None if none is."""
    import numpy as np

    out = []
    for ref in refs:
        v = ref()
        if v is None:
            continue
        value = v.numpy() if hasattr(v, "numpy") else np.asarray(v)
        a = np.asarray(value, dtype=np.float64)
        out.append([float(a.sum()), float(np.square(a).sum()), float(a.size)])
    return out or None
