"""Crashes of programs written for an older TensorFlow or Keras, run on TensorFlow 2.21
with Keras 3: the classic TF1 multi-tower mistakes (tensorflow/models' CIFAR-10 trainer
and its readers), TF1's tf.contrib, and what Keras 3 removed or changed that TF2's
tutorials and guides still use. Each with the real fix, not TensorFlow's generic hint.

Part of the one catalogue (gpudiag.catalogue.all_entries); searched before the other
crash entries, so that the specific cause wins. ``source`` "captured": TensorFlow 2.21 /
Keras 3 printed the example on this project's machine, from the program named in the
entry's meaning or from tests/programs/tf1_multitower.py and tests/unit/test_catalogue.py's
Keras 3 reproductions; "python: FILE" where the text is Keras's source.
"""

from __future__ import annotations

from gpudiag.catalogue.entry import Entry

LEGACY_KERAS = ("or keep the program as it is with Keras 2: pip install tf_keras (the "
                "version of your TensorFlow) and run it with TF_USE_LEGACY_KERAS=1 in the "
                "environment (tf.keras is then tf_keras).")

ENTRIES: tuple[Entry, ...] = (
    # ------------------------------------------------------------ TF1 multi-tower
    Entry("tf1-reuse-on-root-scope", "crash", "function", "fail",
          r"Variable (?P<variable>\S+?)/(?P<shadow>ExponentialMovingAverage|Momentum|Adam"
          r"|RMSProp|Adagrad)\S*/? does not exist, or was not created with "
          r"tf\.get_variable\(\)",
          "tf.get_variable_scope().reuse_variables() inside the tower loop set reuse on the "
          "root variable scope: every variable created after the loop (the "
          "ExponentialMovingAverage's shadow copies, an optimizer's slots) is then looked "
          "up instead of created, and does not exist (tensorflow/models#901). TensorFlow's "
          "hint, reuse=tf.AUTO_REUSE, hides this rather than fixing it.",
          "Wrap the tower loop in `with tf.variable_scope(tf.get_variable_scope()):` (as "
          "tensorflow/models' cifar10_multi_gpu_train.py does), so reuse_variables() "
          "sets reuse on that scope, which ends with the loop; build the moving average and "
          "apply_gradients after it.",
          "ValueError: Variable conv1/weights/ExponentialMovingAverage/ does not exist, or "
          "was not created with tf.get_variable(). Did you mean to set reuse=tf.AUTO_REUSE "
          "in VarScope?", "captured"),
    Entry("tf1-variable-created-twice", "crash", "function", "fail",
          r"Variable (?P<variable>\S+) already exists, disallowed\. Did you mean to set "
          r"reuse=True",
          "The same variable was created a second time under the same name: a model "
          "function called again (a second tower, a second model in the same graph) "
          "without reuse. In a multi-tower program the towers must share one set of "
          "variables.",
          "Share them: call tf.get_variable_scope().reuse_variables() after the first "
          "tower, inside `with tf.variable_scope(tf.get_variable_scope()):` around the "
          "loop; or build the second model in its own variable scope (or graph) if it must "
          "have its own variables.",
          "ValueError: Variable conv1/weights already exists, disallowed. Did you mean to "
          "set reuse=True or reuse=tf.AUTO_REUSE in VarScope?", "captured"),
    Entry("tf1-contrib-removed", "crash", "config", "fail",
          r"(?:module 'tensorflow(?:\.compat\.v1)?' has no attribute 'contrib'|No module "
          r"named 'tensorflow\.contrib')",
          "tf.contrib was removed in TensorFlow 2.0; tf.compat.v1 does not bring it back.",
          "Replace each contrib use: tf.contrib.slim -> the tf-slim package (import "
          "tf_slim as slim); slim.prefetch_queue -> a tf.data pipeline with .prefetch(); "
          "tf.contrib.layers -> tf.keras.layers or tf.compat.v1.layers; "
          "tf.contrib.distribute -> tf.distribute; or run on TensorFlow 1.15.",
          "AttributeError: module 'tensorflow.compat.v1' has no attribute 'contrib'",
          "captured"),
    # ------------------------------------------------------------ Keras 3 (TF 2.16+)
    Entry("keras3-legacy-optimizer", "crash", "config", "fail",
          r"`keras\.optimizers\.legacy` is not supported in Keras 3",
          "The program uses tf.keras.optimizers.legacy (Keras 2's optimizers, as TF's "
          "parameter-server and multi-worker tutorials do); under TensorFlow 2.16+ "
          "tf.keras is Keras 3, which has none.",
          "Use tf.keras.optimizers.SGD/Adam/... (Keras 3's); " + LEGACY_KERAS,
          "ImportError: `keras.optimizers.legacy` is not supported in Keras 3. When using "
          "`tf.keras`, to continue using a `tf.keras.optimizers.legacy` optimizer, you can "
          "install the `tf_keras` package (Keras 2) and set the environment variable "
          "`TF_USE_LEGACY_KERAS=True` to configure TensorFlow to use `tf_keras` when "
          "accessing `tf.keras`.", "captured"),
    Entry("keras3-sharded-assert", "crash", "distribute", "fail",
          r"AssertionError at `assert len\((?P<layer>\w+)\.(?:weights|variables)\) == \d+`",
          "The parameter-server tutorial's own check that the strategy's "
          "variable_partitioner split the embedding into shards, one per parameter server, "
          "failed with no message: Keras 3 does not create ShardedVariables from "
          "ParameterServerStrategy's variable_partitioner (each layer keeps one whole "
          "variable).",
          "Under Keras 3 drop the shard assertions (the variables stay whole on one "
          "parameter server each); to shard embeddings across parameter servers as the "
          "tutorial does, " + LEGACY_KERAS.removeprefix("or "),
          "AssertionError at `assert len(emb_layer.weights) == 2`", "captured"),
    Entry("keras3-layers-experimental", "crash", "config", "fail",
          r"module '(?:keras\._tf_keras\.)?keras\.layers' has no attribute 'experimental'",
          "tf.keras.layers.experimental (preprocessing layers such as "
          "experimental.preprocessing.StringLookup, as TF 2.x tutorials wrote them) is "
          "gone in Keras 3.",
          "Use the layers' stable names: tf.keras.layers.StringLookup, IntegerLookup, "
          "Normalization, Rescaling, RandomFlip, ...; " + LEGACY_KERAS,
          "AttributeError: module 'keras._tf_keras.keras.layers' has no attribute "
          "'experimental'", "captured"),
    Entry("keras3-reset-states", "crash", "config", "fail",
          r"object has no attribute 'reset_states'",
          "Keras 3 renamed Metric.reset_states() to reset_state() (the custom-loop and "
          "parameter-server tutorials call reset_states() at each epoch's end).",
          "Call metric.reset_state() (it works in tf_keras too); " + LEGACY_KERAS,
          "AttributeError: 'SparseCategoricalAccuracy' object has no attribute "
          "'reset_states'", "captured"),
    Entry("keras3-kerastensor-tf-op", "crash", "config", "fail",
          r"A KerasTensor cannot be used as input to a TensorFlow function",
          "A TensorFlow op (tf.reduce_mean, tf.concat, ...) was applied to a Functional "
          "model's symbolic input: Keras 2 wrapped it in a layer for you, Keras 3 refuses.",
          "Use the Keras layer or keras.ops function for it (GlobalAveragePooling1D for "
          "tf.reduce_mean(x, axis=1), keras.ops.*), or wrap the TensorFlow code in a Layer "
          "subclass's call(); " + LEGACY_KERAS,
          "ValueError: A KerasTensor cannot be used as input to a TensorFlow function. A "
          "KerasTensor is a symbolic placeholder for a shape and dtype, used when "
          "constructing Keras Functional models or Keras Functions.", "captured"),
    Entry("keras3-save-extension", "crash", "config", "fail",
          r"Invalid filepath extension for saving\. Please add either a `\.keras` extension",
          "model.save() was given a directory-style path (TF 2's SavedModel format, as the "
          "multi-worker Keras tutorial's `model.save(write_model_path)` writes it): Keras "
          "3 saves only .keras or .h5 files.",
          "Save to a file ending in .keras (model.save('model.keras')); for a SavedModel "
          "(TF Serving) use model.export(path); " + LEGACY_KERAS,
          "ValueError: Invalid filepath extension for saving. Please add either a `.keras` "
          "extension for the native Keras format (recommended) or a `.h5` extension. Use "
          "`model.export(filepath)` if you want to export a SavedModel for use with "
          "TFLite/TFServing/etc. Received: filepath=/tmp/tf29/keras-model.", "captured"),
    Entry("keras3-save-weights-extension", "crash", "config", "fail",
          r"The filename must end in `\.weights\.h5`",
          "model.save_weights() was given a TF checkpoint prefix (as TF 2 tutorials "
          "write, e.g. './checkpoints/ckpt'): Keras 3 writes weights only to "
          "*.weights.h5 files.",
          "Name the file '....weights.h5'; for TF checkpoints use "
          "tf.train.Checkpoint(model=model).save(prefix); " + LEGACY_KERAS,
          "ValueError: The filename must end in `.weights.h5`. Received: "
          "filepath=/tmp/tf29/ckpt", "captured"),
    Entry("keras3-load-savedmodel", "crash", "config", "fail",
          r"File format not supported: filepath=.*Keras 3 only supports V3 `\.keras` files",
          "tf.keras.models.load_model() was given a SavedModel directory: Keras 3 loads "
          "only .keras and .h5 files.",
          "Load it for inference with keras.layers.TFSMLayer(path, "
          "call_endpoint='serving_default') or tf.saved_model.load(path); save new models "
          "as .keras; " + LEGACY_KERAS,
          "ValueError: File format not supported: filepath=/tmp/tf29. Keras 3 only "
          "supports V3 `.keras` files, legacy H5 format files (`.h5` extension).",
          "captured"),
)
