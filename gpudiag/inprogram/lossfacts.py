"""What a Keras fit's loss is given, read once per ``fit`` call: the loss (its name, class,
``from_logits``), the model's last layer (class, activation, units) and first layers, and
a bounded summary of the labels and inputs passed as arrays (dtype, shape, min, max,
integer-valued, the distinct labels up to a cap), for gpudiag.verdicts.run.loss_setup;
and how the fit's batch logs are reduced over its replicas (reduction_facts), for
gpudiag.verdicts.run.replica_losses.

Cheap and bounded: at most MAX_LABELS labels and MAX_INPUT_VALUES input values are read,
from the first rows. NumPy is used only when the program has already imported it (Keras
has); nothing is imported here. A tf.data.Dataset, a generator or a PyDataset is not read
(that would run the program's pipeline): the summary says so instead.
"""

from __future__ import annotations

import sys
from typing import Any

MAX_LABELS = 100_000
MAX_INPUT_VALUES = 1_000_000
DISTINCT_CAP = 64  # distinct label values counted up to this
FIRST_LAYERS = 4


def _name(obj: Any) -> str | None:
    if obj is None:
        return None
    if isinstance(obj, str):
        return obj
    return getattr(obj, "__name__", None) or type(obj).__name__


def reduction_facts(model: Any, strategy: Any) -> dict[str, Any]:
    """How the fit's batch logs are reduced over its replicas (gpudiag.verdicts.run.
    replica_losses): the Keras package, distribute_reduction_method, multi-worker mode."""
    packages = (c.__module__.split(".", 1)[0] for c in type(model).__mro__)  # a subclass's
    out: dict[str, Any] = {"keras": next((p for p in packages if p in ("keras", "tf_keras")),
                                         None)}
    how = getattr(model, "distribute_reduction_method", None)
    out["reduction"] = how if isinstance(how, str) else None
    try:
        multi = strategy.extended._in_multi_worker_mode()
        out["multi_worker"] = multi if isinstance(multi, bool) else None
    except Exception:
        out["multi_worker"] = None
    return out


def loss_facts(loss: Any) -> dict[str, Any]:
    """The loss as compiled: its name (a string's, a function's or a Loss object's
    ``name``), its class and ``from_logits`` (None: not said by the loss)."""
    if isinstance(loss, dict | list | tuple):
        return {"name": None, "class": type(loss).__name__, "from_logits": None,
                "several": True}
    from_logits = None
    try:
        config = loss.get_config() if hasattr(loss, "get_config") else {}
        value = config.get("from_logits") if isinstance(config, dict) else None
        from_logits = value if isinstance(value, bool) else None
    except Exception:
        from_logits = None
    if from_logits is None and (isinstance(loss, str) or callable(loss)) \
            and not hasattr(loss, "get_config"):
        from_logits = False  # a string or a plain function: Keras's default
    name = getattr(loss, "name", None) if not isinstance(loss, str) else loss
    return {"name": name if isinstance(name, str) else _name(loss),
            "class": type(loss).__name__ if not isinstance(loss, str) else None,
            "from_logits": from_logits, "several": False}


def _activation(layer: Any) -> str | None:
    if type(layer).__name__ == "Softmax":
        return "softmax"
    return _name(getattr(layer, "activation", None))


def model_facts(model: Any) -> dict[str, Any]:
    """The model's last layer and first layers' classes; a model subclassed by the program
    has no known last layer (its call() decides)."""
    out: dict[str, Any] = {"loss": loss_facts(getattr(model, "loss", None)),
                           "last_layer": None, "first_layers": None, "layers": None}
    if type(model).__module__.split(".", 1)[0] not in ("keras", "tf_keras"):
        out["why_no_layers"] = (f"a subclassed model ({type(model).__name__}): its last "
                                "layer is what its call() returns")
        return out
    layers = list(getattr(model, "layers", None) or [])
    if not layers:
        out["why_no_layers"] = "the model lists no layers"
        return out
    last = layers[-1]
    units = getattr(last, "units", None)
    out["last_layer"] = {"class": type(last).__name__, "activation": _activation(last),
                         "units": units if isinstance(units, int) else None,
                         "name": getattr(last, "name", None)}
    out["first_layers"] = [type(layer).__name__ for layer in layers[:FIRST_LAYERS]]
    out["layers"] = sorted({type(layer).__name__ for layer in layers})[:40]
    return out


def _rows(value: Any, limit: int) -> Any:
    """The first rows of ``value`` holding at most ``limit`` values, as a NumPy array."""
    np = sys.modules.get("numpy")
    shape = tuple(getattr(value, "shape", ()) or ())
    per_row = 1
    for dim in shape[1:]:
        per_row *= int(dim or 1)
    rows = max(1, limit // max(1, per_row))
    part = value[:rows] if shape else value
    if hasattr(part, "numpy"):
        part = part.numpy()
    return np.asarray(part) if np is not None else None


def summary(value: Any, limit: int, distinct: bool) -> dict[str, Any] | None:
    """dtype, shape, min, max, whether integer-valued and (``distinct``) the distinct
    values up to DISTINCT_CAP, of the first values of an array (None: not an array)."""
    np = sys.modules.get("numpy")
    shape = getattr(value, "shape", None)
    if np is None or shape is None or getattr(value, "dtype", None) is None:
        return None
    dims = [None if d is None else int(d) for d in tuple(shape)]
    out: dict[str, Any] = {"dtype": str(getattr(value.dtype, "name", value.dtype)),
                           "shape": dims}
    part = _rows(value, limit)
    if part is None or part.size == 0 or part.dtype.kind not in "biuf":
        return out
    flat = part.reshape(-1)
    if part.dtype.kind == "f" and not np.isfinite(flat).all():
        flat = flat[np.isfinite(flat)]
        if flat.size == 0:
            return out
    out.update(read=int(flat.size), min=float(flat.min()), max=float(flat.max()),
               integer_valued=bool(part.dtype.kind in "biu" or (flat == np.floor(flat)).all()))
    if distinct and out["integer_valued"]:
        values = np.unique(flat)
        out["distinct"] = int(values.size) if values.size <= DISTINCT_CAP else None
        out["distinct_cap"] = DISTINCT_CAP
    return out


def fit_data(args: tuple[Any, ...], kwargs: dict[str, Any], caller: Any) -> dict[str, Any]:
    """The labels' and inputs' summaries of a fit call (``labels`` / ``inputs`` None, with
    ``unread`` saying why, when they were not arrays passed to it), with the program's line
    that called fit; never raises."""
    try:
        return {**_fit_data(args, kwargs), "caller": caller}
    except Exception as exc:
        return {"labels": None, "inputs": None, "caller": caller,
                "unread": f"gpudiag could not read them ({type(exc).__name__}: {exc})"[:300]}


def begin_facts(model: Any, data: dict[str, Any] | None) -> dict[str, Any]:
    """The fit_begin event's fields of this module (gpudiag.layout.loopevents.FitBegin)."""
    data = data or {}
    try:
        setup = model_facts(model)
    except Exception as exc:
        setup = {"why_no_layers": f"gpudiag could not read the model ({type(exc).__name__})"}
    return {"setup": setup, "labels": data.get("labels"), "inputs": data.get("inputs"),
            "data_unread": data.get("unread"), "caller": data.get("caller")}


def _fit_data(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    x = args[0] if args else kwargs.get("x")
    y = args[1] if len(args) > 1 else kwargs.get("y")
    out: dict[str, Any] = {"labels": None, "inputs": None, "unread": None}
    if y is None:
        kind = "a tf.data.Dataset" if hasattr(x, "element_spec") else (
            f"a {type(x).__name__}" if x is not None else "nothing")
        out["unread"] = (f"fit was given {kind} (x) with its labels inside: gpudiag reads "
                         "labels only from arrays passed to fit, never running the "
                         "program's pipeline")
        return out
    np = sys.modules.get("numpy")
    if isinstance(y, list) and np is not None and y and \
            all(isinstance(v, int | float) for v in y[:16]):  # scalars, not several outputs
        y = np.asarray(y[:MAX_LABELS])
    out["labels"] = summary(y, MAX_LABELS, True)
    if out["labels"] is None:
        out["unread"] = f"the labels are a {type(y).__name__}, not one array"
    out["inputs"] = summary(x, MAX_INPUT_VALUES, False)
    return out
