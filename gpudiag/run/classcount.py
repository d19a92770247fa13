"""The number of classes a training loop's loss is over, from evidence only (parent side).

A loss stuck at ln(C) means the model predicts all C classes alike; that verdict needs C
from the program, never a guess (a slowly falling loss is near ln k for some k):

- Keras fit: the model's output width, when its loss is a categorical cross-entropy
  (sparse or not: C = the width) or a binary one (C = 2 per output); any other loss
  (mean squared error, a custom function) gives no count;
- a step tf.function: the softmax cross-entropy ops of its graphs
  (gpudiag.inprogram.classevidence, in the program), their logits' last dimension.

Each count comes with the evidence it was read from (``classes_from``).
"""

from __future__ import annotations

import re

from gpudiag.layout import loopevents as lev

_CATEGORICAL = re.compile(r"categorical_?crossentropy", re.IGNORECASE)
_BINARY = re.compile(r"binary_?crossentropy", re.IGNORECASE)
_FOCAL = re.compile(r"focal", re.IGNORECASE)


def fit_classes(output_width: int | None, loss: str | None) -> tuple[int | None, str]:
    """(classes, where from) for a Keras fit: ``loss`` is the repr of model.loss."""
    if not loss or loss == "None":
        return None, "the model's loss is unknown"
    if _FOCAL.search(loss):
        return None, f"the loss {loss[:60]} is not plain cross-entropy"
    if _BINARY.search(loss):
        return 2, f"binary cross-entropy ({loss[:60]}): ln 2 per output"
    if _CATEGORICAL.search(loss):
        if output_width and output_width > 1:
            return output_width, (f"the model's output width {output_width} with "
                                  f"{loss[:60]}")
        return None, "categorical cross-entropy, but the model's output width is unknown"
    return None, f"the loss {loss[:60]} is not a cross-entropy over classes"


def function_classes(function: lev.Function | None) -> tuple[int | None, str]:
    """(classes, where from) for a step tf.function's ``function`` event."""
    if function is None:
        return None, "the step function's graph was not recorded"
    found = [f for f in function.cross_entropy if isinstance(f, dict)]
    classes = function.classes
    if classes:
        ops = sorted({f"{f.get('op')} {f.get('node')}" for f in found})
        return int(classes), (f"the logits [batch, {classes}] of {len(found)} softmax "
                              f"cross-entropy op(s) in its graph ({ops[0]})")
    if found:
        widths = sorted({str(f.get("classes")) for f in found})
        return None, f"its cross-entropy ops disagree on the classes ({', '.join(widths)})"
    return None, "no softmax cross-entropy op in its graph"
