"""An MNIST-like Keras training script, as a user would write it (no gpudiag inside).

Generated data (no download): 28x28 images of 10 classes, each class a fixed random
template plus noise. A small CNN trained with Model.fit under
tf.distribute.MirroredStrategy (all GPUs; the CPU when there is none), 3 epochs of 40
steps, then evaluated. Run it under gpudiag:

    gpudiag run -- python -m gpudiag.examples.keras_mnist_like
"""

from __future__ import annotations

import numpy as np
import tensorflow as tf

CLASSES = 10
BATCH = 64


def make_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    templates = np.random.default_rng(123).normal(0.0, 1.0, (CLASSES, 28, 28, 1))
    labels = rng.integers(0, CLASSES, n)
    images = templates[labels] + rng.normal(0.0, 1.5, (n, 28, 28, 1))
    return images.astype("float32"), labels.astype("int64")


def main() -> None:
    strategy = tf.distribute.MirroredStrategy()
    print(f"replicas: {strategy.num_replicas_in_sync}")
    x_train, y_train = make_data(BATCH * 40, seed=1)
    x_test, y_test = make_data(1000, seed=2)
    train = (tf.data.Dataset.from_tensor_slices((x_train, y_train))
             .shuffle(2048).batch(BATCH * strategy.num_replicas_in_sync).prefetch(2))
    with strategy.scope():
        model = tf.keras.Sequential([
            tf.keras.Input((28, 28, 1)),
            tf.keras.layers.Conv2D(16, 3, activation="relu"),
            tf.keras.layers.MaxPooling2D(),
            tf.keras.layers.Flatten(),
            tf.keras.layers.Dense(64, activation="relu"),
            tf.keras.layers.Dense(CLASSES),
        ])
        model.compile(optimizer=tf.keras.optimizers.Adam(1e-3),
                      loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                      metrics=["accuracy"])
    model.fit(train, epochs=3, verbose=2)
    loss, accuracy = model.evaluate(x_test, y_test, verbose=0)
    print(f"test loss {loss:.4f}, test accuracy {accuracy:.3f}")


if __name__ == "__main__":
    main()
