"""run.loss-setup: does a Keras fit's loss fit its labels and its last layer? (pure)

From what the fit hook read once per ``fit`` call (gpudiag.inprogram.lossfacts: the loss's
name and ``from_logits``, the last layer's activation and units, the labels' and inputs'
dtype, shape, min, max, whole numbers or not, distinct values) and the losses the fit
logged, the mistakes people make that leave a model unable to learn, each at the
program's line (``compile(...)`` for the loss and the model, ``fit(...)`` for the data)
with its one-line fix:

- binary cross-entropy on labels outside {0, 1} (digit labels 0-9 into one sigmoid unit);
- class indices into categorical cross-entropy, one-hot rows into the sparse one;
- labels reaching past the last layer's units;
- softmax/sigmoid outputs with ``from_logits=True``, a linear last layer without it;
- a loss below 0 that cannot be below 0 on labels in its range;
- whole-number inputs 0-255 into Dense/Conv layers with nothing scaling them.

Only what was read is judged: a rule whose fact the hook could not see (labels inside a
tf.data.Dataset, a subclassed model's last layer) is skipped, saying what is missing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding, Status
from gpudiag.verdicts.common import title

UNSCALED_FROM = 32  # whole-number inputs from 0 whose max is in [this, 255]: pixel-like
SCALING_LAYERS = ("Rescaling", "Normalization", "BatchNormalization", "LayerNormalization")
CROSS_ENTROPIES = ("binary", "categorical", "sparse")
NONNEGATIVE = ("meansquared", "meanabsolute", "mse", "mae", "msle", "mape", "huber",
               "logcosh", "hinge")


RANGES = {"binary": "{0, 1}", "sparse": "class indices from 0", "categorical": "one-hot rows"}


@dataclass(frozen=True)
class Check:
    """One rule's outcome: ``status`` fail / warn / ok / skip (a fact not seen:
    ``missing`` says which), the fix and where it goes (``file:line``)."""

    rule: str
    status: Status
    text: str
    short: str = ""
    fix: str = ""
    where: str | None = None
    missing: str = ""  # skip: the fact the hook could not see


@dataclass(frozen=True)
class Setup:
    """One fit's facts, as the rules read them."""

    label: str
    loss: str | None
    kind: str | None  # binary / categorical / sparse / nonnegative / None
    from_logits: bool | None
    last: dict[str, Any] | None
    no_layers: str | None  # why the layers were not read
    layers: list[str] | None
    first_layers: list[str] | None
    units: int | None
    labels: dict[str, Any] | None
    inputs: dict[str, Any] | None
    unread: str | None
    compile_at: str | None
    fit_at: str | None
    lowest_loss: float | None


def loss_kind(name: str | None) -> str | None:
    """The loss's family from its name (None: one gpudiag does not judge)."""
    n = (name or "").lower().replace("_", "").replace(" ", "")
    if "crossentropy" in n:
        return "sparse" if "sparse" in n else "binary" if "binary" in n else \
            "categorical" if "categorical" in n else None
    return "nonnegative" if any(k in n for k in NONNEGATIVE) else None


def _at(frame: Any) -> str | None:
    if not isinstance(frame, dict) or not frame.get("file"):
        return None
    return f"{str(frame['file']).rsplit('/', 1)[-1]}:{frame.get('line')}"


def _lowest(s: StepSeries) -> float | None:
    values = [st.loss for st in s.steps if st.loss is not None] + [
        e["loss"] for e in s.epochs if isinstance(e.get("loss"), int | float)]
    values = [float(v) for v in values if math.isfinite(v)]
    return min(values) if values else None


def setup_of(s: StepSeries) -> Setup:
    f = s.facts
    setup = f.get("setup") or {}
    loss = setup.get("loss") or {}
    last = setup.get("last_layer")
    units = f.get("output_width") or (last or {}).get("units")
    name = loss.get("name") if not loss.get("several") else None
    return Setup(s.label, name, loss_kind(name), loss.get("from_logits"), last,
                 setup.get("why_no_layers"), setup.get("layers"), setup.get("first_layers"),
                 units if isinstance(units, int) else None, f.get("labels"), f.get("inputs"),
                 f.get("data_unread"), _at((f.get("compile") or {}).get("caller")),
                 _at(f.get("fit_caller")), _lowest(s))


def _skip(rule: str, what: str, why: str | None) -> Check:
    """A rule not checked: ``what`` it would have checked, ``why`` (the fact missing)."""
    return Check(rule, "skip", what, missing=why or "not recorded")


def _span(lo: float, hi: float) -> str:
    return f"{lo:g} to {hi:g}" if lo < 0 else f"{lo:g}-{hi:g}"  # never "-1-1"


def _range(labels: dict[str, Any]) -> str:
    n = labels.get("distinct")
    return _span(labels["min"], labels["max"]) + (f" ({n} distinct values)" if n else "")


def _binary(s: Setup) -> Check | None:
    if s.kind != "binary":
        return None
    y = s.labels
    if y is None or "min" not in y:
        return _skip("binary-labels", "binary cross-entropy's labels", s.unread)
    if y["min"] >= 0 and y["max"] <= 1:
        return Check("binary-labels", "ok", "binary cross-entropy on labels in [0, 1]")
    whole = y.get("integer_valued") and y["min"] >= 0
    k = int(y["max"]) + 1 if whole else y.get("distinct")
    fix = (f"for {k} classes: Dense({k}, activation='softmax') last and "
           "loss='sparse_categorical_crossentropy'" if whole else
           "labels in {0, 1}, or a loss for what the labels are (mean_squared_error for "
           "values)")
    return Check("binary-labels", "fail", (
        f"binary cross-entropy ({s.loss}) on labels {_range(y)}: it takes labels in "
        "{0, 1}, and on larger ones its loss falls below 0 while nothing is learned"),
        f"binary cross-entropy on labels {_span(y['min'], y['max'])}", fix, s.compile_at)


def _shape(y: dict[str, Any]) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in y["shape"]) + \
        ("," if len(y["shape"]) == 1 else "") + ")"


def _sparse_or_one_hot(s: Setup) -> Check | None:
    if s.kind not in ("categorical", "sparse"):
        return None
    y = s.labels
    if y is None or "min" not in y:
        return _skip("label-form", f"{s.loss}'s labels", s.unread)
    dims = y["shape"]
    last = dims[-1] if len(dims) >= 2 else None
    indices = len(dims) == 1 or last == 1
    one_hot = last is not None and last > 1 and y.get("integer_valued") and \
        y["min"] >= 0 and y["max"] <= 1
    if s.kind == "categorical" and indices and (s.units or 0) > 1:
        return Check("label-form", "fail", (
            f"categorical cross-entropy ({s.loss}) on class indices (labels of shape "
            f"{_shape(y)}, {_range(y)}) against {s.units} outputs: it takes one-hot rows "
            f"of {s.units}"), "categorical cross-entropy on class indices",
            f"loss='sparse_categorical_crossentropy' (or one-hot labels: "
            f"keras.utils.to_categorical(y, {s.units}))", s.compile_at)
    if s.kind == "sparse" and one_hot:
        return Check("label-form", "fail", (
            f"sparse categorical cross-entropy ({s.loss}) on one-hot labels (shape "
            f"{_shape(y)}): it takes one class index per example"),
            "sparse categorical cross-entropy on one-hot labels",
            "loss='categorical_crossentropy' (or y.argmax(axis=-1))", s.compile_at)
    form = "class indices" if indices else "one-hot rows" if one_hot else "labels"
    return Check("label-form", "ok", f"{s.loss} on {form} of shape {_shape(y)}")


def _units(s: Setup) -> Check | None:
    if s.kind not in ("categorical", "sparse"):
        return None
    y = s.labels
    if y is None or "min" not in y:
        return _skip("units", "the last layer's units against the labels", s.unread)
    if s.units is None:
        return _skip("units", "the last layer's units against the labels",
                     s.no_layers or "the model's output width was not read")
    dims = y["shape"]
    if s.kind == "categorical" and len(dims) >= 2 and dims[-1] not in (None, 1, s.units):
        return Check("units", "fail", f"one-hot labels of {dims[-1]} against a last layer "
                     f"of {s.units} unit(s)", f"labels of {dims[-1]} into {s.units} units",
                     f"Dense({dims[-1]}) last: one unit per class", s.compile_at)
    if s.kind == "sparse" and y.get("integer_valued") and int(y["max"]) + 1 > s.units:
        k = int(y["max"]) + 1
        return Check("units", "fail", (
            f"labels reach {int(y['max'])} ({k} classes) but the last layer has {s.units} "
            f"unit(s): a class index must be below the units"),
            f"{k} classes into {s.units} unit(s)", f"Dense({k}) last: one unit per class",
            s.compile_at)
    return Check("units", "ok", f"{s.units} output unit(s) for the labels")


def _logits(s: Setup) -> Check | None:
    if s.kind not in CROSS_ENTROPIES:
        return None
    what = "the last layer's activation against from_logits"
    if s.from_logits is None:
        return _skip("from-logits", what, "the loss's from_logits was not read")
    if s.last is None:
        return _skip("from-logits", what, s.no_layers)
    act = s.last.get("activation")
    if s.from_logits and act in ("softmax", "sigmoid"):
        return Check("from-logits", "warn", (
            f"the last layer's {act} outputs probabilities and the loss is told they are "
            f"logits (from_logits=True): Keras takes the {act}'s input as the logits for "
            f"this loss when the {act} is the output's own op (it warns so), but whatever "
            f"else reads the outputs as logits applies the {act} twice"),
            f"{act} outputs with from_logits=True",
            f"drop the last activation (Dense({s.units or 'C'}) alone) and keep "
            f"from_logits=True, or keep the {act} and from_logits=False", s.compile_at)
    if not s.from_logits and act == "linear":
        return Check("from-logits", "warn", (
            f"the last layer ({s.last.get('class')}) is linear, its outputs any real "
            "number, and the loss takes them as probabilities (from_logits=False): Keras "
            "clips them into (0, 1), and a clipped output gets no gradient"),
            "linear outputs with from_logits=False",
            f"from_logits=True in the loss (keras.losses.<{s.loss}>(from_logits=True)), or "
            "a softmax/sigmoid last layer", s.compile_at)
    if act is None:
        return _skip("from-logits", what, f"the last layer ({s.last.get('class')}) has no "
                     "activation of its own")
    return Check("from-logits", "ok", f"a {act} last layer with from_logits={s.from_logits}")


def _negative(s: Setup) -> Check | None:
    if s.kind is None:
        return None
    if s.lowest_loss is None:
        return _skip("negative-loss", "whether the loss went below 0", "no loss was logged")
    if s.lowest_loss < 0:
        return Check("negative-loss", "fail", (
            f"the loss went below 0 (lowest {s.lowest_loss:.3g}): {s.loss} is never "
            "negative on labels in its range, so the labels do not fit the loss"
            + ("" if s.labels and "min" in s.labels else f" (the labels: {s.unread})")),
            f"the loss went below 0 ({s.lowest_loss:.3g})",
            f"labels in {s.loss}'s range ({RANGES.get(s.kind or '', 'its own')}), or the "
            "loss that fits the labels", s.compile_at)
    return Check("negative-loss", "ok", f"the loss stayed at or above 0 "
                 f"(lowest {s.lowest_loss:.3g})")


def _inputs(s: Setup) -> Check | None:
    what = "whether the inputs are scaled"
    if s.layers is None:
        return _skip("inputs-scaled", what, s.no_layers)
    if not any(n.startswith(("Dense", "Conv")) for n in s.layers) or \
            any("Embedding" in n for n in s.layers):
        return None
    x = s.inputs
    if x is None or "min" not in x:
        return _skip("inputs-scaled", what, s.unread or "the inputs are not one array")
    if any(n in SCALING_LAYERS for n in s.first_layers or []):
        return Check("inputs-scaled", "ok", "the model scales its inputs "
                     f"({', '.join(n for n in s.first_layers or [] if n in SCALING_LAYERS)})")
    if x.get("integer_valued") and x["min"] >= 0 and UNSCALED_FROM <= x["max"] <= 255:
        return Check("inputs-scaled", "warn", (
            f"the inputs reach the model unscaled: whole numbers {x['min']:g}-{x['max']:g} "
            f"({x['dtype']}) into {', '.join(s.first_layers or [])} with no Rescaling or "
            "Normalization layer first: large inputs saturate the first layers and slow "
            "learning"), f"inputs {x['min']:g}-{x['max']:g} unscaled",
            "x = x / 255.0 before fit (or keras.layers.Rescaling(1/255) first)", s.fit_at)
    return Check("inputs-scaled", "ok", f"inputs {x['min']:.3g} to {x['max']:.3g}")


RULES = (_binary, _sparse_or_one_hot, _units, _logits, _negative, _inputs)


def checks(s: Setup) -> list[Check]:
    """Every rule's outcome for one fit, in order (rules that do not apply left out); a
    negative loss beside a mismatch that explains it carries no fix of its own."""
    out = [c for rule in RULES if (c := rule(s)) is not None]
    if any(c.status == "fail" and c.rule != "negative-loss" for c in out):
        out = [replace(c, fix="", where=None) if c.rule == "negative-loss" else c
               for c in out]
    return out


def _said(c: Check) -> str:
    return c.text + (f" (at {c.where})" if c.where else "")


def loss_setup(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """The checks of every Keras fit of the process (None: no fit)."""
    fits = [setup_of(s) for s in obs.series if s.kind == "fit"]
    if not fits:
        return None
    found: dict[tuple[str, str], Check] = {}
    for s in fits:
        for c in checks(s):
            found.setdefault((c.rule, c.text), c)
    done = list(found.values())
    evidence = {"fits": [asdict(s) for s in fits], "checks": [asdict(c) for c in done]}
    return _finding(f"run.loss-setup{proc}", fits, done, evidence)


def _finding(check_id: str, fits: Sequence[Setup], done: list[Check],
             evidence: dict[str, Any]) -> Finding:
    bad = [c for c in done if c.status in ("fail", "warn")]
    fine = [c for c in done if c.status == "ok"]
    unseen = [c for c in done if c.status == "skip"]
    status: Status = "fail" if any(c.status == "fail" for c in bad) else \
        "warn" if bad else "ok" if fine else "skip"
    loss = fits[0].loss or "the loss"
    parts = [_said(c) for c in bad]
    if fine:
        parts.append("checked: " + "; ".join(c.text for c in fine))
    missing: dict[str, list[str]] = {}
    for c in unseen:
        missing.setdefault(c.missing, []).append(c.text)
    parts += [f"not checked ({why}): " + "; ".join(texts) for why, texts in missing.items()]
    message = f"{fits[0].label}: " + ("; ".join(parts) or f"no rule applies to {loss}")
    if bad:
        head = bad[0].short + (f" at {bad[0].where}" if bad[0].where else "")
        return Finding(check_id, status, message, evidence,
                       advice=" ".join(f"{c.fix}." for c in bad if c.fix),
                       title=title(f"{head}: the loss does not fit", head, bad[0].short),
                       actions=tuple(Action(c.fix, c.where) for c in bad if c.fix))
    if fine and unseen:
        return Finding(check_id, "ok", message, evidence, title=title(
            f"{loss}: no mismatch in {len(fine)} check(s), {len(unseen)} not checked",
            f"no mismatch in {len(fine)} check(s), {len(unseen)} not checked"))
    if fine:
        return Finding(check_id, "ok", message, evidence, title=title(
            f"{loss} fits the labels and the last layer ({len(fine)} checks)",
            "the loss fits the labels and the last layer"))
    return Finding(check_id, "skip", message, evidence,
                   title="the loss against the labels: not checked")
