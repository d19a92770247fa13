"""Tower-averaged data-parallel training: the classic in-graph replication.

As in TensorFlow's cifar10_multi_gpu_train: the global batch is split into one slice
per device; under ``tf.device(device)`` and ``tf.name_scope("tower_<i>")`` each tower
computes its slice's mean loss and the gradients with respect to the *shared*
variables; the gradients are averaged (one mean per variable across the towers, on the
variables' device) and applied with one optimizer update. The variables, the optimizer's
slots and the moving averages live on the host CPU (``variables_on="cpu"``) or on the
first compute device (``"device"``). The whole step is one ``tf.function``. The moving
average takes each step's weights at the start of the next step (and once more after
the last, ``sync_ema``), beside that step's work rather than after its update.

Because every tower's slice has the same size, the mean of the towers' mean-loss
gradients equals the gradient of the mean loss over the whole batch; MirroredStrategy
(mirrored.py) computes the same number through ``compute_average_loss`` and an
all-reduce sum. tests/e2e/test_train.py checks both equalities.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import keras
import tensorflow as tf

from gpudiag import layout
from gpudiag.errors import UsageError
from gpudiag.train import summaries
from gpudiag.train.model import ModelTask, ProbeModel, correct_count, per_example_loss
from gpudiag.train.summaries import Instrumentation

HOST_DEVICE = "/device:CPU:0"
VARIABLES_ON = ("cpu", "device")


def make_optimizer(learning_rate: float, momentum: float) -> keras.optimizers.SGD:
    """SGD with momentum (Keras 3's optimizer updates plain tf.Variables too)."""
    return keras.optimizers.SGD(learning_rate=learning_rate, momentum=momentum)


@dataclass(frozen=True)
class TrainerOptions:
    """How every trainer trains its ModelTask: the same for towers, mirrored, multi-worker
    and Keras's fit."""

    batch_per_device: int  # examples per device (per replica) and step
    learning_rate: float
    momentum: float = 0.9
    instrumentation: Instrumentation | None = None  # None: Instrumentation()
    seed: int = 0  # of the initial weights

    @property
    def instr(self) -> Instrumentation:
        return self.instrumentation or Instrumentation()


def build_state(
    task: ModelTask, options: TrainerOptions
) -> tuple[ProbeModel, tf.Variable, keras.optimizers.SGD, Any]:
    """What every trainer keeps: model, step counter, built optimizer, moving average
    (its shadows created, equal to the weights; None when off). Call it under the scope
    that places the variables (``tf.device`` or ``strategy.scope()``)."""
    model = ProbeModel(task.spec, task.input_shape, task.num_classes, seed=options.seed)
    step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    optimizer = make_optimizer(options.learning_rate, options.momentum)
    optimizer.build(model.params)
    ema = summaries.make_ema(options.instr.ema_decay, step)
    if ema is not None:
        ema.apply(model.params)
    return model, step, optimizer, ema


def checkpoint_of(model: ProbeModel, step: tf.Variable, optimizer: Any,
                  ema: Any) -> tf.train.Checkpoint:
    """Model, optimizer, step and (when on) the moving averages under ``ema/<param>``."""
    extra: dict[str, Any] = {}
    if ema is not None:
        extra["ema"] = {name.replace("/", "_"): ema.average(v)
                        for name, v in zip(model.param_names, model.params, strict=True)}
    return tf.train.Checkpoint(step=step, model=model, optimizer=optimizer, **extra)


def normalize_device(name: str) -> str:
    """``/job:localhost/replica:0/task:0/device:CPU:1`` -> ``/device:CPU:1``; '' stays ''."""
    if not name:
        return ""
    spec = tf.DeviceSpec.from_string(name)
    if spec.device_type is None:
        return ""
    return f"/device:{spec.device_type.upper()}:{spec.device_index or 0}"


def op_devices(graph: tf.Graph) -> dict[str, str]:
    """Node name -> the device it was assigned in a traced step (gpudiag.readers.traces attributes
    the trace's host ops with it)."""
    return {op.name: device for op in graph.get_operations()
            if (device := normalize_device(op.device))}


def ops_by_device(graph: tf.Graph) -> dict[str, int]:
    """How many ops of a traced step were assigned to each device (requested placement)."""
    counts: dict[str, int] = {}
    for op in graph.get_operations():
        device = normalize_device(op.device) or "(unassigned)"
        counts[device] = counts.get(device, 0) + 1
    return dict(sorted(counts.items()))


class TowerTrainer:
    """One tower per device; averaged gradients; one update. See the module docstring."""

    strategy_name = "towers"

    def __init__(
        self,
        task: ModelTask,
        devices: list[str],
        options: TrainerOptions,
        *,
        variables_on: str = "cpu",
    ) -> None:
        if variables_on not in VARIABLES_ON:
            raise UsageError(f"--variables-on {variables_on!r} is not one of: cpu, device")
        self.devices = list(devices)
        self.batch_per_device = options.batch_per_device
        self.global_batch = options.batch_per_device * len(devices)
        self.instr = options.instr
        self.variables_device = HOST_DEVICE if variables_on == "cpu" else self.devices[0]
        with tf.device(self.variables_device):
            self.model, self.step, self.optimizer, self.ema = build_state(task, options)
        self.ema_decay = self.instr.ema_decay or 0.0
        with tf.device(self.variables_device):  # the last update the moving average holds
            self.ema_step = tf.Variable(0, dtype=tf.int64, trainable=False, name="ema_step")
        self._step_fn = tf.function(self._step)
        self._sync_fn = tf.function(self._sync)
        self._graph: tf.Graph | None = None

    # -- the step ---------------------------------------------------------------------

    def tower_gradients(
        self, x: tf.Tensor, y: tf.Tensor
    ) -> tuple[list[list[tf.Tensor]], list[tf.Tensor], list[tf.Tensor]]:
        """Per tower: gradients of its slice's mean loss, its loss, its correct count."""
        n = len(self.devices)
        with tf.device(HOST_DEVICE):
            xs, ys = tf.split(x, n), tf.split(y, n)
        grads, losses, correct = [], [], []
        for i, device in enumerate(self.devices):
            with tf.device(device), tf.name_scope(layout.tower_scope(i)):
                with tf.GradientTape() as tape:
                    logits = self.model(xs[i])
                    loss = tf.reduce_mean(per_example_loss(logits, ys[i]))
                grads.append(tape.gradient(loss, self.model.params))
                losses.append(loss)
                correct.append(correct_count(logits, ys[i]))
        return grads, losses, correct

    def averaged_gradients(self, x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
        """The gradient the update applies: one mean per variable across the towers."""
        grads, _, _ = self.tower_gradients(x, y)
        return average_gradients(grads, self.variables_device)

    def _step(self, iterator: Any, histograms: bool = False) -> dict[str, tf.Tensor]:
        if self.ema is not None:  # the previous step's weights, beside this step's work
            with tf.device(self.variables_device):
                summaries.catch_up_ema(self.ema, self.ema_decay, self.step, self.ema_step,
                                       self.model.params)
        x, y = next(iterator)
        tower_grads, losses, correct = self.tower_gradients(x, y)
        grads = average_gradients(tower_grads, self.variables_device)
        with tf.device(self.variables_device):
            loss = tf.reduce_mean(tf.stack(losses))
            accuracy = tf.add_n(correct) / float(self.global_batch)
        self.optimizer.apply_gradients(zip(grads, self.model.params, strict=True))
        step = self.step.assign_add(1)
        if histograms:
            summaries.write_histograms(step, self.model.param_names,
                                       lambda: (grads, self.model.params))
        out = {"loss": loss, "accuracy": accuracy, "tower_losses": tf.stack(losses)}
        if self.instr.scalars:
            with tf.device(self.variables_device):
                out["norms"] = summaries.step_norms(
                    grads, self.ema_params() if self.ema is not None else None)
        return out

    def run_step(self, iterator: Any, histograms: bool = False) -> dict[str, tf.Tensor]:
        return self._step_fn(iterator, histograms)

    def _sync(self) -> None:
        if self.ema is not None:
            with tf.device(self.variables_device):
                summaries.catch_up_ema(self.ema, self.ema_decay, self.step, self.ema_step,
                                       self.model.params)

    def sync_ema(self) -> None:
        """The moving average up to the last step's weights (each step brings it up to the
        previous step's): before evaluating or saving the average."""
        self._sync_fn()

    def make_iterator(self, dataset: tf.data.Dataset) -> Any:
        with tf.device(HOST_DEVICE):
            return iter(dataset)

    def apply_batch(self, x: tf.Tensor, y: tf.Tensor) -> None:
        """One update from one given batch (tests compare it with mirrored.py)."""
        self.run_step(iter(tf.data.Dataset.from_tensors((x, y))))

    # -- evidence and evaluation ------------------------------------------------------

    def step_graph(self, iterator: Any) -> tf.Graph:
        if self._graph is None:
            self._graph = self._step_fn.get_concrete_function(iterator, False).graph
        return self._graph

    def raw_params(self) -> list[tf.Tensor]:
        return [tf.convert_to_tensor(v) for v in self.model.params]

    def ema_params(self) -> list[tf.Tensor]:
        assert self.ema is not None
        return [self.ema.average(v) for v in self.model.params]

    def checkpoint(self) -> tf.train.Checkpoint:
        ckpt = checkpoint_of(self.model, self.step, self.optimizer, self.ema)
        ckpt.ema_step = self.ema_step
        return ckpt


def average_gradients(
    tower_grads: list[list[tf.Tensor]], device: str
) -> list[tf.Tensor]:
    """One mean per variable across towers, computed on ``device``."""
    with tf.device(device), tf.name_scope(layout.AVERAGE_GRADIENTS_SCOPE):
        return [
            tf.reduce_mean(tf.stack(per_var), axis=0)
            for per_var in zip(*tower_grads, strict=True)
        ]
