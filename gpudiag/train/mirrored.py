"""The same training step with tf.distribute.MirroredStrategy and a custom loop.

The way TensorFlow's distributed-training guide writes it: the dataset is distributed
(``experimental_distribute_dataset`` splits each global batch into one slice per
replica); ``strategy.run`` computes, per replica, the loss scaled by the *global* batch
(``tf.nn.compute_average_loss(per_example_loss, global_batch_size=...)``) and its
gradients; the gradients are summed across replicas (an all-reduce with the strategy's
cross-device ops: NCCL on GPUs, a reduction to one device on CPUs), which makes them the
average over the global batch; one update is applied to every mirrored copy; the loss
and accuracy come back through ``strategy.reduce``.

``optimizer.apply_gradients`` is called inside ``strategy.run``, where Keras all-reduces
the gradients before updating. The averaged gradient whose global norm is logged every
step (and whose histogram every K steps) is the sum of the replicas' gradients, added
on the first device.
Each replica's ops are under ``tf.name_scope("tower_<i>")`` like the towers', so a
profiler trace attributes work to devices the same way for both.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from gpudiag import layout
from gpudiag.train import summaries
from gpudiag.train.model import ModelTask, correct_count, per_example_loss
from gpudiag.train.towers import TrainerOptions, build_state, checkpoint_of


class MirroredTrainer:
    """MirroredStrategy over ``devices``; same model, data and update as TowerTrainer."""

    strategy_name = "mirrored"

    def __init__(self, task: ModelTask, devices: list[str], options: TrainerOptions) -> None:
        self.devices = list(devices)
        self.batch_per_device = options.batch_per_device
        self.global_batch = options.batch_per_device * len(devices)
        self.instr = options.instr
        self.strategy = tf.distribute.MirroredStrategy(self.devices)
        self.variables_device = self.devices[0]
        with self.strategy.scope():
            self.model, self.step, self.optimizer, self.ema = build_state(task, options)
        self._step_fn = tf.function(self._step)
        self._graph: tf.Graph | None = None

    def _replica_loss_and_grads(self, x: tf.Tensor, y: tf.Tensor) -> tuple[Any, ...]:
        ctx = tf.distribute.get_replica_context()
        replica = tf.get_static_value(ctx.replica_id_in_sync_group)
        with tf.name_scope(layout.tower_scope(int(replica))):
            with tf.GradientTape() as tape:
                logits = self.model(x)
                per_example = per_example_loss(logits, y)
                loss = tf.nn.compute_average_loss(
                    per_example, global_batch_size=self.global_batch
                )
            grads = tape.gradient(loss, self.model.params)
        return loss, grads, correct_count(logits, y), tf.reduce_mean(per_example)

    def _replica_step(self, x: tf.Tensor, y: tf.Tensor) -> tuple[Any, ...]:
        loss, grads, correct, mean_loss = self._replica_loss_and_grads(x, y)
        # In replica context the optimizer all-reduces (sums) the gradients across
        # replicas, then updates every mirrored copy.
        self.optimizer.apply_gradients(zip(grads, self.model.params, strict=True))
        return loss, grads, correct, mean_loss

    def _step(self, iterator: Any, histograms: bool = False) -> dict[str, tf.Tensor]:
        x, y = next(iterator)
        loss, grads, correct, tower_loss = self.strategy.run(self._replica_step, args=(x, y))
        step = self.step.assign_add(1)
        if self.ema is not None:
            self.ema.apply(self.model.params)
        total_loss = self.strategy.reduce(tf.distribute.ReduceOp.SUM, loss, axis=None)
        accuracy = (
            self.strategy.reduce(tf.distribute.ReduceOp.SUM, correct, axis=None)
            / float(self.global_batch)
        )
        local = self.strategy.experimental_local_results
        tower_losses = list(local(tower_loss))
        out = {"loss": total_loss, "accuracy": accuracy, "tower_losses": tf.stack(tower_losses)}
        if not (histograms or self.instr.scalars):
            return out
        # The averaged gradient is the sum of the replicas' gradients (each loss is
        # already divided by the global batch), on the first device.
        with tf.device(self.variables_device):
            averaged = [tf.add_n(list(local(g))) for g in grads]
            if self.instr.scalars:
                out["norms"] = summaries.step_norms(
                    averaged, [local(v)[0] for v in self.ema_params()] if self.ema else None)
        if histograms:
            summaries.write_histograms(step, self.model.param_names, lambda: (
                averaged, [local(v)[0] for v in self.model.params]))
        return out

    def run_step(self, iterator: Any, histograms: bool = False) -> dict[str, tf.Tensor]:
        with self.strategy.scope():  # the moving average's update needs the strategy's scope
            return self._step_fn(iterator, histograms)

    def make_iterator(self, dataset: tf.data.Dataset) -> Any:
        return iter(self.strategy.experimental_distribute_dataset(dataset))

    def averaged_gradients(self, x: tf.Tensor, y: tf.Tensor) -> list[tf.Tensor]:
        """The all-reduced gradient of one global batch, as plain tensors (for tests)."""
        iterator = self.make_iterator(tf.data.Dataset.from_tensors((x, y)))

        @tf.function
        def grads_of(it: Any) -> list[Any]:
            xs, ys = next(it)
            _, grads, _, _ = self.strategy.run(self._replica_loss_and_grads, args=(xs, ys))
            reduced = self.strategy.extended.batch_reduce_to(
                tf.distribute.ReduceOp.SUM,
                list(zip(grads, self.model.params, strict=True)),
            )
            return [self.strategy.experimental_local_results(g)[0] for g in reduced]

        with self.strategy.scope():
            return grads_of(iterator)

    def apply_batch(self, x: tf.Tensor, y: tf.Tensor) -> None:
        """One update from one given global batch (tests compare it with towers.py)."""
        self.run_step(self.make_iterator(tf.data.Dataset.from_tensors((x, y))))

    def step_graph(self, iterator: Any) -> tf.Graph:
        if self._graph is None:
            with self.strategy.scope():
                self._graph = self._step_fn.get_concrete_function(iterator, False).graph
        return self._graph

    def raw_params(self) -> list[tf.Tensor]:
        return [tf.convert_to_tensor(self.strategy.experimental_local_results(v)[0])
                for v in self.model.params]

    def ema_params(self) -> list[Any]:
        assert self.ema is not None
        return [self.ema.average(v) for v in self.model.params]

    def checkpoint(self) -> tf.train.Checkpoint:
        return checkpoint_of(self.model, self.step, self.optimizer, self.ema)
