"""The official "TensorFlow 2 quickstart for experts" with a classic mistake: logits and
softmax mixed. The model's last layer has a softmax and the loss is written with
tf.nn.sparse_softmax_cross_entropy_with_logits (as TensorFlow 1 code did), which applies
a softmax again: no warning from anyone, and the loss cannot go below ln(1 + 9/e) = 1.46.

Source: tensorflow/docs site/en/tutorials/quickstart/advanced.ipynb
Adapted only where no internet and no GPU force it:
- generated learnable data of MNIST's shapes (28x28x1 in [0, 1], 10 classes) instead of
  tf.keras.datasets.mnist;
- 1024 images, 3 epochs of 32 batches; no test loop;
- the weights and the shuffle seeded (tf.keras.utils.set_random_seed(0)): in 3 epochs an
  unlucky start comes down onto the floor more slowly; seeded, every run is the same.
"""

import numpy as np
import tensorflow as tf
from tensorflow.keras import Model
from tensorflow.keras.layers import Conv2D, Dense, Flatten

tf.keras.utils.set_random_seed(0)

rng = np.random.default_rng(0)
templates = rng.uniform(size=(10, 28, 28)).astype("float32")
y_train = rng.integers(0, 10, 1024)
x_train = np.clip(templates[y_train] + 0.1 * rng.normal(size=(1024, 28, 28)), 0, 1)

# Add a channels dimension
x_train = x_train[..., tf.newaxis].astype("float32")

train_ds = tf.data.Dataset.from_tensor_slices((x_train, y_train)).shuffle(1024).batch(32)


class MyModel(Model):
    def __init__(self):
        super().__init__()
        self.conv1 = Conv2D(32, 3, activation='relu')
        self.flatten = Flatten()
        self.d1 = Dense(128, activation='relu')
        self.d2 = Dense(10, activation='softmax')

    def call(self, x):
        x = self.conv1(x)
        x = self.flatten(x)
        x = self.d1(x)
        return self.d2(x)


# Create an instance of the model
model = MyModel()

optimizer = tf.keras.optimizers.Adam()

train_loss = tf.keras.metrics.Mean(name='train_loss')
train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name='train_accuracy')


@tf.function
def train_step(images, labels):
    with tf.GradientTape() as tape:
        # training=True is only needed if there are layers with different
        # behavior during training versus inference (e.g. Dropout).
        predictions = model(images, training=True)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=predictions))
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    train_loss(loss)
    train_accuracy(labels, predictions)
    return loss


EPOCHS = 3

for epoch in range(EPOCHS):
    # Reset the metrics at the start of the next epoch
    train_loss.reset_state()
    train_accuracy.reset_state()

    for images, labels in train_ds:
        train_step(images, labels)

    print(
        f'Epoch {epoch + 1}, '
        f'Loss: {train_loss.result():0.4f}, '
        f'Accuracy: {train_accuracy.result() * 100:0.2f}'
    )
