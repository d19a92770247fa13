"""keras-io's "Simple MNIST convnet" with a classic mistake: logits and softmax
mixed (the last layer keeps its softmax, the loss is told the outputs are logits).

Source: keras-team/keras-io examples/vision/mnist_convnet.py
Adapted only where no internet and no GPU force it:
- generated learnable data of MNIST's shapes (28x28x1 images in [0, 1], 10 classes) instead
  of keras.datasets.mnist.load_data();
- 512 training images, 3 epochs instead of 60000 and 15; no evaluation on a test set.
"""

import numpy as np
from tensorflow import keras
from tensorflow.keras import layers

# Model / data parameters
num_classes = 10
input_shape = (28, 28, 1)

rng = np.random.default_rng(0)
templates = rng.uniform(size=(num_classes, 28, 28))
y_train = rng.integers(0, num_classes, 512)
x_train = np.clip(templates[y_train] + 0.3 * rng.normal(size=(512, 28, 28)), 0, 1)
x_train = x_train.astype("float32")
x_train = np.expand_dims(x_train, -1)
print("x_train shape:", x_train.shape)

# convert class vectors to binary class matrices
y_train = keras.utils.to_categorical(y_train, num_classes)

model = keras.Sequential(
    [
        keras.Input(shape=input_shape),
        layers.Conv2D(32, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Conv2D(64, kernel_size=(3, 3), activation="relu"),
        layers.MaxPooling2D(pool_size=(2, 2)),
        layers.Flatten(),
        layers.Dropout(0.5),
        layers.Dense(num_classes, activation="softmax"),
    ]
)

batch_size = 128
epochs = 3

model.compile(loss=keras.losses.CategoricalCrossentropy(from_logits=True),
              optimizer="adam", metrics=["accuracy"])

model.fit(x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1,
          verbose=2)
