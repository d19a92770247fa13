"""run.loss-setup (gpudiag.verdicts.run.loss_setup) with plain records: the fit hook's facts
of the loss, the last layer and the labels (gpudiag.inprogram.lossfacts), as a fit's
StepSeries carries them."""

from __future__ import annotations

from typing import Any

from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.verdicts.run import loss_setup

COMPILE = {"file": "/home/u/train.py", "line": 20, "function": "<module>"}
FIT = {"file": "/home/u/train.py", "line": 21, "function": "<module>"}


def labels(lo: float, hi: float, shape: list[int | None], distinct: int | None,
           whole: bool = True, dtype: str = "int64") -> dict[str, Any]:
    return {"dtype": dtype, "shape": shape, "read": 600, "min": lo, "max": hi,
            "integer_valued": whole, "distinct": distinct, "distinct_cap": 64}


def fit(loss: str | None, activation: str | None, units: int | None,
        y: dict[str, Any] | None, *, from_logits: bool | None = False,
        x: dict[str, Any] | None = None, losses: list[float] | None = None,
        layers: list[str] | None = None, unread: str | None = None,
        why_no_layers: str | None = None) -> StepSeries:
    setup: dict[str, Any] = {"loss": {"name": loss, "class": None, "from_logits": from_logits,
                                      "several": False}}
    if why_no_layers:
        setup.update(last_layer=None, layers=None, first_layers=None,
                     why_no_layers=why_no_layers)
    else:
        setup.update(last_layer={"class": "Dense", "activation": activation, "units": units},
                     layers=layers or ["Dense"], first_layers=layers or ["Dense", "Dense"])
    steps = [Step(i, 100.0 + i, 0.01, v, epoch=0) for i, v in enumerate(losses or [])]
    return StepSeries("fit", "Model.fit", steps, 32, None, {
        "setup": setup, "labels": y, "inputs": x, "data_unread": unread,
        "output_width": units, "compile": {"caller": COMPILE}, "fit_caller": FIT})


def judged(*series: StepSeries) -> Any:
    obs = ProcessObservation(pid=1, ppid=0, argv=["train.py"], start_env={},
                             tf_version="2.21.0", series=list(series))
    return loss_setup.loss_setup(obs)


def by_rule(f: Any) -> dict[str, dict[str, Any]]:
    return {c["rule"]: c for c in f.evidence["checks"]}


def test_one_sigmoid_unit_on_digit_labels_names_the_cause_and_the_fix_at_compile() -> None:
    """Issue 46's program: one sigmoid unit, binary_crossentropy, labels 0-9; its loss
    went from 0.66 to -41.9."""
    f = judged(fit("binary_crossentropy", "sigmoid", 1, labels(0, 9, [600], 10),
                   losses=[0.66, -3.0, -20.0, -41.9]))
    assert f.status == "fail"
    assert f.title.startswith("binary cross-entropy on labels 0-9 at train.py:20")
    assert "labels 0-9 (10 distinct values)" in f.message and "(at train.py:20)" in f.message
    checks = by_rule(f)
    assert checks["negative-loss"]["status"] == "fail" and "-41.9" in f.message
    assert checks["negative-loss"]["fix"] == ""  # the labels' mismatch explains it
    (action,) = f.actions
    assert action.where == "train.py:20" and "Dense(10, activation='softmax')" in \
        action.what and "sparse_categorical_crossentropy" in action.what
    svm = judged(fit("binary_crossentropy", "sigmoid", 1, labels(-1, 1, [600], 2)))
    assert svm.status == "fail" and "on labels -1 to 1 (2 distinct values)" in svm.message
    assert svm.actions[0].what.startswith("labels in {0, 1}")
    # labels in {0, 1}: the same model is right
    ok = judged(fit("binary_crossentropy", "sigmoid", 1, labels(0, 1, [600], 2),
                    losses=[0.7, 0.5]))
    assert ok.status == "ok" and ok.actions == ()


def test_class_indices_into_categorical_and_one_hot_rows_into_sparse() -> None:
    f = judged(fit("categorical_crossentropy", "softmax", 10, labels(0, 9, [400], 10)))
    assert f.status == "fail" and by_rule(f)["label-form"]["status"] == "fail"
    assert "on class indices (labels of shape (400,), 0-9" in f.message
    assert "sparse_categorical_crossentropy" in f.actions[0].what
    one_hot = judged(fit("sparse_categorical_crossentropy", "softmax", 10,
                         labels(0, 1, [400, 10], 2)))
    assert one_hot.status == "fail" and "on one-hot labels (shape (400, 10))" in \
        one_hot.message and "categorical_crossentropy" in one_hot.actions[0].what
    right = judged(fit("categorical_crossentropy", "softmax", 10, labels(0, 1, [400, 10], 2)))
    assert right.status == "ok", right.message


def test_labels_past_the_last_layers_units() -> None:
    f = judged(fit("sparse_categorical_crossentropy", "softmax", 5, labels(0, 9, [400], 10)))
    assert f.status == "fail" and "labels reach 9 (10 classes) but the last layer has 5" in \
        f.message and f.actions[0].what.startswith("Dense(10) last")
    hot = judged(fit("categorical_crossentropy", "softmax", 5, labels(0, 1, [400, 10], 2)))
    assert "one-hot labels of 10 against a last layer of 5 unit(s)" in hot.message


def test_from_logits_against_the_last_activation() -> None:
    twice = judged(fit("sparse_categorical_crossentropy", "softmax", 10,
                       labels(0, 9, [512], 10), from_logits=True))
    assert twice.status == "warn" and twice.title.startswith(
        "softmax outputs with from_logits=True at train.py:20")
    assert "Keras takes the softmax's input as the logits for this loss" in twice.message
    linear = judged(fit("binary_crossentropy", "linear", 1, labels(0, 1, [512], 2)))
    assert linear.status == "warn" and "from_logits=True in the loss" in \
        linear.actions[0].what
    assert judged(fit("binary_crossentropy", "linear", 1, labels(0, 1, [512], 2),
                      from_logits=True)).status == "ok"


def test_unscaled_pixels_into_dense_layers_at_the_fit_line() -> None:
    pixels = labels(0, 255, [600, 784], None, dtype="uint8")
    f = judged(fit("sparse_categorical_crossentropy", "softmax", 10, labels(0, 9, [600], 10),
                   x=pixels, layers=["Flatten", "Dense"]))
    assert f.status == "warn" and "whole numbers 0-255 (uint8)" in f.message
    assert f.actions[0].where == "train.py:21" and "x / 255.0" in f.actions[0].what
    scaled = judged(fit("sparse_categorical_crossentropy", "softmax", 10,
                        labels(0, 9, [600], 10), x=pixels, layers=["Rescaling", "Dense"]))
    assert scaled.status == "ok"
    tokens = judged(fit("sparse_categorical_crossentropy", "softmax", 10,
                        labels(0, 9, [600], 10), x=pixels, layers=["Embedding", "Dense"]))
    assert "inputs-scaled" not in by_rule(tokens)


def test_what_the_hook_could_not_see_is_skipped_and_said() -> None:
    unread = "fit was given a tf.data.Dataset (x) with its labels inside"
    f = judged(fit("binary_crossentropy", None, None, None, unread=unread,
                   why_no_layers="a subclassed model (Net): its last layer is what its "
                   "call() returns", losses=[0.7, 0.6]))
    assert f.status == "ok"  # the loss stayed above 0: the one thing it could judge
    checks = by_rule(f)
    assert checks["binary-labels"]["status"] == "skip"
    assert f"not checked ({unread}): binary cross-entropy's labels" in f.message
    assert f.title == "binary_crossentropy: no mismatch in 1 check(s), 3 not checked"
    assert checks["from-logits"]["status"] == "skip" and "a subclassed model (Net)" in \
        f.message
    # a negative loss with labels unseen: said, with why the labels were not read
    neg = judged(fit("binary_crossentropy", None, None, None, unread=unread,
                     why_no_layers="a subclassed model", losses=[0.7, -2.0]))
    assert neg.status == "fail" and "the loss went below 0 (lowest -2)" in neg.message
    assert f"(the labels: {unread})" in neg.message
    assert judged(fit("my_loss", "sigmoid", 1, None)).status == "skip"
    no_fit = ProcessObservation(pid=1, ppid=0, argv=["x"], start_env={}, tf_version="2")
    assert loss_setup.loss_setup(no_fit) is None


def test_loss_names_as_keras_spells_them() -> None:
    assert loss_setup.loss_kind("binary_crossentropy") == "binary"
    assert loss_setup.loss_kind("BinaryFocalCrossentropy") == "binary"
    assert loss_setup.loss_kind("sparse_categorical_crossentropy") == "sparse"
    assert loss_setup.loss_kind("categorical_crossentropy") == "categorical"
    assert loss_setup.loss_kind("mean_squared_error") == "nonnegative"
    assert loss_setup.loss_kind("cosine_similarity") is None
