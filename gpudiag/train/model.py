"""The probe model: a small image classifier built from plain ``tf.Variable``s.

The convolutional models follow the classic multi-GPU examples (TensorFlow's
cifar10_multi_gpu_train): conv 5x5, max-pool 2x2, conv 5x5, max-pool 2x2, a dense layer,
the logits. ``mlp`` is a one-hidden-layer perceptron for quick runs. No layer depends on
the batch (no batch normalisation, no dropout), so the gradient averaged over towers
equals the gradient of the whole batch, which tests/e2e/test_train.py checks.

The weights are initialised from a NumPy generator with a fixed seed (Glorot uniform,
zero biases), so towers, MirroredStrategy and Keras all start from the same numbers.
``ProbeModel.forward(params, x)`` takes the weights as an argument, which is how the
evaluation with the moving-average weights reuses the same function.
"""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from gpudiag.train.specs import (
    KERNEL_SIZE,
    ModelSpec,
    ModelTask,
    gradient_bytes,
    initial_values,
    model_spec,
    param_shapes,
)

__all__ = [
    "KERNEL_SIZE", "ModelSpec", "ModelTask", "ProbeModel", "build_keras_model", "correct_count",
    "gradient_bytes", "initial_values", "model_spec", "param_shapes", "per_example_loss",
]


class ProbeModel(tf.Module):
    """The classifier's weights plus a pure forward function.

    Variables are created in the caller's device scope (``tf.device`` or a
    distribution strategy's scope), which is how towers put them on the CPU or on
    the first device and MirroredStrategy mirrors them.
    """

    def __init__(
        self,
        spec: ModelSpec,
        input_shape: tuple[int, int, int],
        num_classes: int,
        seed: int = 0,
    ) -> None:
        super().__init__(name="probe_model")
        self.spec = spec
        self.input_shape = input_shape
        self.num_classes = num_classes
        self.shapes = param_shapes(spec, input_shape, num_classes)
        self.params = [
            tf.Variable(value, name=p.name.replace("/", "_"), trainable=True)
            for p, value in zip(self.shapes, initial_values(self.shapes, seed), strict=True)
        ]

    @property
    def param_names(self) -> list[str]:
        return [p.name for p in self.shapes]

    def __call__(self, x: tf.Tensor) -> tf.Tensor:
        return self.forward(self.params, x)

    def forward(self, params: Sequence[tf.Tensor | tf.Variable], x: tf.Tensor) -> tf.Tensor:
        """Logits for a batch ``x`` of shape [batch, height, width, channels]."""
        i = 0
        if self.spec.conv1_filters:
            for layer in ("conv1", "conv2"):
                with tf.name_scope(layer):
                    x = tf.nn.conv2d(x, params[i], strides=1, padding="SAME")
                    x = tf.nn.relu(tf.nn.bias_add(x, params[i + 1]))
                    x = tf.nn.max_pool2d(x, ksize=2, strides=2, padding="SAME")
                i += 2
        with tf.name_scope("dense"):
            x = tf.reshape(x, [tf.shape(x)[0], -1])
            x = tf.nn.relu(tf.matmul(x, params[i]) + params[i + 1])
        with tf.name_scope("logits"):
            return tf.matmul(x, params[i + 2]) + params[i + 3]


def per_example_loss(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Softmax cross-entropy per example (the mean is the caller's choice)."""
    return tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)


def correct_count(logits: tf.Tensor, labels: tf.Tensor) -> tf.Tensor:
    """Number of examples whose arg-max logit is the label, as float32."""
    predicted = tf.argmax(logits, axis=1, output_type=labels.dtype)
    return tf.reduce_sum(tf.cast(tf.equal(predicted, labels), tf.float32))


def build_keras_model(
    spec: ModelSpec, input_shape: tuple[int, int, int], num_classes: int, seed: int = 0
):  # -> keras.Model (keras is imported lazily: only the keras strategy needs it)
    """The same architecture and the same initial weights as a Keras Sequential model."""
    import keras

    layers: list = [keras.Input(shape=input_shape)]
    if spec.conv1_filters:
        for name, filters in (("conv1", spec.conv1_filters), ("conv2", spec.conv2_filters)):
            layers.append(
                keras.layers.Conv2D(
                    filters, KERNEL_SIZE, padding="same", activation="relu", name=name
                )
            )
            layers.append(keras.layers.MaxPooling2D(2, padding="same"))
    layers += [
        keras.layers.Flatten(),
        keras.layers.Dense(spec.hidden_units, activation="relu", name="dense"),
        keras.layers.Dense(num_classes, name="logits"),
    ]
    model = keras.Sequential(layers, name="probe_model")
    shapes = param_shapes(spec, input_shape, num_classes)
    model.set_weights(initial_values(shapes, seed))
    return model
