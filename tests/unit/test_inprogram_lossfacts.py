"""gpudiag.inprogram.lossfacts on plain arrays and objects shaped as Keras's (no TensorFlow):
bounded summaries of the labels and inputs fit is given, and the loss's facts."""

from __future__ import annotations

from typing import Any

import numpy as np

from gpudiag.inprogram import lossfacts


def test_labels_summary_is_bounded_and_says_range_whole_numbers_and_distinct_values() -> None:
    y = np.arange(600) % 10
    s = lossfacts.summary(y, lossfacts.MAX_LABELS, True)
    assert s == {"dtype": "int64", "shape": [600], "read": 600, "min": 0.0, "max": 9.0,
                 "integer_valued": True, "distinct": 10, "distinct_cap": 64}
    many = lossfacts.summary(np.arange(1000, dtype="float32"), 500, True)
    assert many is not None and many["read"] == 500 and many["max"] == 499.0
    assert many["distinct"] is None  # more than the cap: not counted
    soft = lossfacts.summary(np.array([0.2, 0.9]), 10, True)
    assert soft is not None and soft["integer_valued"] is False and "distinct" not in soft


def test_input_rows_are_read_up_to_a_number_of_values() -> None:
    x = np.zeros((1000, 28, 28), dtype="uint8")
    x[:, 0, 0] = 255
    s = lossfacts.summary(x, 28 * 28 * 10, False)
    assert s is not None and s["read"] == 28 * 28 * 10 and s["shape"] == [1000, 28, 28]
    assert s["dtype"] == "uint8" and s["max"] == 255.0 and s["integer_valued"]


def test_fit_data_reads_arrays_and_says_why_not_for_a_dataset() -> None:
    at = {"file": "/u/train.py", "line": 9, "function": "<module>"}
    d = lossfacts.fit_data((np.ones((8, 3)), np.arange(8)), {}, at)
    assert d["labels"]["max"] == 7.0 and d["inputs"]["shape"] == [8, 3]
    assert d["caller"] == at and d["unread"] is None
    listed = lossfacts.fit_data((np.ones((4, 3)), [0, 1, 2, 9]), {}, at)
    assert listed["labels"]["max"] == 9.0 and listed["labels"]["distinct"] == 4
    outputs = lossfacts.fit_data((np.ones((4, 3)), [np.arange(4), np.arange(4)]), {}, at)
    assert outputs["labels"] is None and "a list, not one array" in outputs["unread"]

    class Dataset:
        element_spec = ()

    d = lossfacts.fit_data((Dataset(),), {"epochs": 2}, at)
    assert d["labels"] is None and "a tf.data.Dataset" in d["unread"]

    class Broken:
        shape = (3,)
        dtype = "int64"

        def __getitem__(self, key: Any) -> Any:
            raise RuntimeError("no")

    d = lossfacts.fit_data((np.ones((3, 2)),), {"y": Broken()}, at)
    assert d["labels"] is None and "RuntimeError: no" in d["unread"]  # never raised


def test_loss_facts_from_a_string_a_function_and_a_loss_object() -> None:
    assert lossfacts.loss_facts("binary_crossentropy")["from_logits"] is False

    def mse(y: Any, p: Any) -> Any:
        return 0

    assert lossfacts.loss_facts(mse)["name"] == "mse"

    class SparseCategoricalCrossentropy:
        name = "sparse_categorical_crossentropy"

        def get_config(self) -> dict[str, Any]:
            return {"from_logits": True, "name": self.name}

    facts = lossfacts.loss_facts(SparseCategoricalCrossentropy())
    assert facts == {"name": "sparse_categorical_crossentropy",
                     "class": "SparseCategoricalCrossentropy", "from_logits": True,
                     "several": False}
    assert lossfacts.loss_facts({"a": "mse"})["several"] is True


def test_reduction_facts_name_the_keras_package_of_a_subclass_and_multi_worker_mode() -> None:
    class Sequential:
        distribute_reduction_method = "auto"

    Sequential.__module__ = "tf_keras.src.engine.sequential"

    class Net(Sequential):  # the program's own subclass
        pass

    class Extended:
        def _in_multi_worker_mode(self) -> bool:
            return True

    class Strategy:
        extended = Extended()

    assert lossfacts.reduction_facts(Net(), Strategy()) == {
        "keras": "tf_keras", "reduction": "auto", "multi_worker": True}
    assert lossfacts.reduction_facts(object(), None) == {
        "keras": None, "reduction": None, "multi_worker": None}  # never raises
