"""The official custom-training tutorial with a classic mistake: the loss reduced twice. The
loss object keeps Keras's default reduction (a mean over the replica's batch: a scalar),
then tf.nn.compute_average_loss divides by the global batch again (it refuses a scalar).

Source: tensorflow/docs site/en/tutorials/distribute/custom_training.ipynb
Adapted only where no internet and no GPU force it:
- generated learnable data of Fashion-MNIST's shapes (28x28x1 images, 10 classes) instead
  of tfds/keras.datasets downloads;
- two logical CPU devices for the two replicas (tf.config.set_logical_device_configuration);
- 1 epoch of a few batches, no checkpoint, no test loop.
- the model and optimizer built inside the scope (the Keras 3 fix), so that the loss is
  what fails.
"""

import numpy as np
import tensorflow as tf

cpus = tf.config.list_physical_devices("CPU")
tf.config.set_logical_device_configuration(
    cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2)

rng = np.random.default_rng(0)
templates = rng.normal(size=(10, 28, 28, 1)).astype("float32")
train_labels = rng.integers(0, 10, 512)
train_images = templates[train_labels] + 0.5 * rng.normal(size=(512, 28, 28, 1)).astype(
    "float32")

strategy = tf.distribute.MirroredStrategy()
print("Number of devices: {}".format(strategy.num_replicas_in_sync))

BUFFER_SIZE = len(train_images)
BATCH_SIZE_PER_REPLICA = 32
GLOBAL_BATCH_SIZE = BATCH_SIZE_PER_REPLICA * strategy.num_replicas_in_sync
EPOCHS = 1

train_dataset = tf.data.Dataset.from_tensor_slices((train_images, train_labels)).shuffle(
    BUFFER_SIZE).batch(GLOBAL_BATCH_SIZE)
train_dist_dataset = strategy.experimental_distribute_dataset(train_dataset)


def create_model():
    regularizer = tf.keras.regularizers.L2(1e-5)
    model = tf.keras.Sequential([
        tf.keras.layers.Conv2D(32, 3, activation="relu", kernel_regularizer=regularizer),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Conv2D(64, 3, activation="relu", kernel_regularizer=regularizer),
        tf.keras.layers.MaxPooling2D(),
        tf.keras.layers.Flatten(),
        tf.keras.layers.Dense(64, activation="relu", kernel_regularizer=regularizer),
        tf.keras.layers.Dense(10, kernel_regularizer=regularizer),
    ])
    return model


with strategy.scope():
    loss_object = tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def compute_loss(labels, predictions, model_losses):
        per_example_loss = loss_object(labels, predictions)
        loss = tf.nn.compute_average_loss(per_example_loss, global_batch_size=GLOBAL_BATCH_SIZE)
        if model_losses:
            loss += tf.nn.scale_regularization_loss(tf.add_n(model_losses))
        return loss

with strategy.scope():
    train_accuracy = tf.keras.metrics.SparseCategoricalAccuracy(name="train_accuracy")

# A model, an optimizer, and a checkpoint must be created under `strategy.scope`.
with strategy.scope():
    model = create_model()
    optimizer = tf.keras.optimizers.Adam(learning_rate=0.001)
    model.build((None, 28, 28, 1))
    optimizer.build(model.trainable_variables)


def train_step(inputs):
    images, labels = inputs

    with tf.GradientTape() as tape:
        predictions = model(images, training=True)
        loss = compute_loss(labels, predictions, model.losses)

    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

    train_accuracy.update_state(labels, predictions)
    return loss


# `run` replicates the provided computation and runs it
# with the distributed input.
@tf.function
def distributed_train_step(dataset_inputs):
    per_replica_losses = strategy.run(train_step, args=(dataset_inputs,))
    return strategy.reduce(tf.distribute.ReduceOp.SUM, per_replica_losses, axis=None)


for epoch in range(EPOCHS):
    total_loss = 0.0
    num_batches = 0
    for x in train_dist_dataset:
        total_loss += distributed_train_step(x)
        num_batches += 1
    train_loss = total_loss / num_batches
    print("Epoch {}, Loss: {}, Accuracy: {}".format(epoch + 1, train_loss,
                                                     train_accuracy.result() * 100))
