"""Crashes of what a program hands Keras's fit: the arguments Keras 3 removed or tf_keras
refuses, and a tf.data pipeline whose shapes TensorFlow cannot know.

Part of the one catalogue (gpudiag.catalogue.all_entries), searched before TensorFlow's
own entries. ``source`` "captured": printed on this project's machine by TensorFlow 2.21
with Keras 3.15 (``import keras``, and TensorFlow's tf.keras) or tf_keras 2.21 (``import
tf_keras``), from the programs tests/unit/test_catalogue.py runs (FIT_INPUT_CODE) and
tests/programs/fit_*_crash.py; `gpudiag run` names the map that lost the shapes (the hooks
record each map's output shapes, gpudiag.inprogram.datasets).
"""

from __future__ import annotations

from gpudiag.catalogue.entry import Entry

# the entries whose cause is a dataset's unknown shapes: run.crash names the call that lost
# them (gpudiag.verdicts.run.crash_match.shape_lost_at)
SHAPE_ENTRIES = ("data-unknown-rank", "data-none-dimension")

_QUEUE_ARGS = r"(?P<argument>workers|use_multiprocessing|max_queue_size)"

ENTRIES: tuple[Entry, ...] = (
    Entry("keras3-fit-queue-arguments", "crash", "data", "fail",
          r"(?:(?:fit|evaluate|predict)\(\) got an unexpected keyword argument '|Arguments "
          r"not recognized: \{')" + _QUEUE_ARGS + "'",
          "Keras 3 removed fit's, evaluate's and predict's workers, use_multiprocessing "
          "and max_queue_size (Keras 2's arguments for a keras.utils.Sequence or a "
          "generator): the call stops before the first step.",
          "Drop the argument from the call: with arrays or a tf.data.Dataset it did "
          "nothing. For a keras.utils.PyDataset (Keras 3's Sequence) give them to the "
          "dataset: its __init__ takes **kwargs and calls super().__init__(**kwargs), "
          "then MyDataset(..., workers=4, use_multiprocessing=True).",
          "TypeError: TensorFlowTrainer.fit() got an unexpected keyword argument 'workers'",
          "captured"),
    Entry("tf-keras-fit-not-positive", "crash", "data", "fail",
          r"Expected (?P<argument>workers|max_queue_size) to be positive\. Received is "
          r"(?P<value>-?\d+)",
          "tf_keras's fit checks workers and max_queue_size whatever the data is, and "
          "refuses 0 and negative values (workers=-1 meant to be 'every core'): fit stops "
          "before the first step. They only matter for a keras.utils.Sequence or a "
          "generator.",
          "Drop workers (and use_multiprocessing, max_queue_size) from fit: with arrays or "
          "a tf.data.Dataset they do nothing (tf.data's parallelism is map(..., "
          "num_parallel_calls=tf.data.AUTOTUNE)); for a Sequence give a count of 1 or "
          "more.",
          "ValueError: Expected workers to be positive. Received is -1.", "captured"),
    Entry("keras3-fit-generator", "crash", "data", "fail",
          r"object has no attribute '(?P<method>fit|evaluate|predict)_generator'",
          "Keras 3 removed fit_generator, evaluate_generator and predict_generator (Keras "
          "2 had deprecated them since TensorFlow 2.1): fit takes a generator itself.",
          "Call model.fit(generator, steps_per_epoch=..., epochs=...) (evaluate, predict "
          "likewise); better, a keras.utils.PyDataset or a tf.data.Dataset.",
          "AttributeError: 'Sequential' object has no attribute 'fit_generator'",
          "captured"),
    Entry("data-unknown-rank", "crash", "data", "fail",
          r"(?:as_list\(\) is not defined on an unknown TensorShape|Cannot take the length "
          r"of shape with unknown rank)",
          "A layer got a tensor whose shape TensorFlow does not know, not even its rank: "
          "a tf.data map through tf.numpy_function or tf.py_function (TensorFlow cannot "
          "see what the Python returns), or a from_generator given types without shapes.",
          "Give each output of the map its shape in the mapped function, after the "
          "tf.numpy_function/tf.py_function call: image.set_shape([28, 28]) (or image = "
          "tf.ensure_shape(image, [28, 28]), which also checks it), label.set_shape([]); "
          "for from_generator pass output_signature=(tf.TensorSpec(shape, dtype), ...).",
          "ValueError: as_list() is not defined on an unknown TensorShape.", "captured"),
    Entry("data-none-dimension", "crash", "data", "fail",
          r"(?:Shapes used to initialize variables must be fully-defined \(no `None` "
          r"dimensions\)|The last dimension of the inputs to a `?Dense`? layer should be "
          r"defined\. Found None)",
          "A layer was built from an input whose last dimension is None: its weights' "
          "size is unknown. The data's shape says None where the size is fixed (a map's "
          "set_shape/ensure_shape with None, a from_generator's signature, a "
          "tf.numpy_function's output).",
          "Set the real size where the shape is made: set_shape([784]) or "
          "tf.ensure_shape(x, [784]) in the map, tf.TensorSpec(shape=(784,), ...) in "
          "from_generator's output_signature.",
          "ValueError: Shapes used to initialize variables must be fully-defined (no `None` "
          "dimensions). Received: shape=(None, 64) for variable "
          "path='sequential/dense/kernel'", "captured"),
)
