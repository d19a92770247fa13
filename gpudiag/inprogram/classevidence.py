"""How many classes a step function's loss is over, from the ops it built (in-program).

A softmax cross-entropy op (``SparseSoftmaxCrossEntropyWithLogits``,
``SoftmaxCrossEntropyWithLogits``: what ``tf.nn.*softmax_cross_entropy_with_logits`` and
Keras's categorical cross-entropies build, from logits or from probabilities) takes the
logits ``[batch, classes]``: its last dimension is the number of classes the loss is
over, and a loss stuck at ln(classes) means uniform predictions. Read from the concrete
graphs after the first call (gpudiag.inprogram.functions), never guessed: no such op, an
unknown width, or ops of different widths give no count.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

CROSS_ENTROPY_OPS = ("SparseSoftmaxCrossEntropyWithLogits", "SoftmaxCrossEntropyWithLogits")
MAX_KEPT = 8


def cross_entropy_ops(ops: Iterable[Any]) -> list[dict[str, Any]]:
    """Each softmax cross-entropy op: its node, type, the classes (logits' last dimension,
    None when unknown) and the labels' shape."""
    out: list[dict[str, Any]] = []
    for op in ops:
        if op.type not in CROSS_ENTROPY_OPS or len(out) >= MAX_KEPT:
            continue
        logits, labels = op.inputs[0].shape, op.inputs[1].shape
        dims = logits.as_list() if logits.rank is not None else None
        out.append({"node": op.name, "op": op.type,
                    "classes": dims[-1] if dims else None,
                    "labels_shape": labels.as_list() if labels.rank is not None else None})
    return out


def classes_of(found: list[dict[str, Any]]) -> int | None:
    """The one number of classes all the cross-entropy ops agree on, else None."""
    widths = {f.get("classes") for f in found}
    if len(widths) != 1:
        return None
    (width,) = widths
    return width if isinstance(width, int) and width > 1 else None
