"""The probe workload with real TensorFlow, in this process, on virtual CPU devices.

Gradient averaging over towers equals the full-batch gradient; towers and
MirroredStrategy apply the same update; a short run writes scalars, histograms and the
moving-average evaluation that read back from the event files; the checkpoint restores;
the profiler trace is readable by gpudiag.traces and attributes work to every tower.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

N_VIRTUAL = 4  # compute devices /device:CPU:1..4; CPU:0 is the host


def _configure_devices() -> None:
    """Split the CPU before anything initialises TensorFlow's devices (import time)."""
    cpu = tf.config.list_physical_devices("CPU")[0]
    # RuntimeError: already initialised by another module; devices() skips if too few.
    with contextlib.suppress(RuntimeError):
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration() for _ in range(N_VIRTUAL + 1)]
        )


_configure_devices()

from helpers import REPO  # noqa: E402

from gpudiag import layout  # noqa: E402
from gpudiag.readers import traces  # noqa: E402
from gpudiag.records.training import TrainResult  # noqa: E402
from gpudiag.train import data as data_mod  # noqa: E402
from gpudiag.train import loop as loop_mod  # noqa: E402
from gpudiag.train import summaries  # noqa: E402
from gpudiag.train.mirrored import MirroredTrainer  # noqa: E402
from gpudiag.train.model import ModelTask, ProbeModel, model_spec, per_example_loss  # noqa: E402
from gpudiag.train.summaries import Instrumentation  # noqa: E402
from gpudiag.train.towers import TowerTrainer, TrainerOptions  # noqa: E402

pytestmark = pytest.mark.slow
SHAPE = (28, 28, 1)


def devices(n: int) -> list[str]:
    have = len(tf.config.list_logical_devices("CPU")) - 1
    if have < n:
        pytest.skip(f"TensorFlow was initialised with {have} virtual devices before this module")
    return [f"/device:CPU:{i}" for i in range(1, n + 1)]


@pytest.fixture(scope="module")
def batch() -> tuple[np.ndarray, np.ndarray]:
    return data_mod.synthetic_arrays(16, seed=7)


def full_batch_gradient(spec_name: str, x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """The gradient of the mean loss over the whole batch, one device, no towers."""
    model = ProbeModel(model_spec(spec_name), SHAPE, 10, seed=0)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(per_example_loss(model(tf.constant(x)), tf.constant(y)))
    return [g.numpy() for g in tape.gradient(loss, model.params)]


@pytest.mark.parametrize("spec_name", ["cnn-small", "mlp"])
@pytest.mark.parametrize("n", [2, 4])
def test_tower_average_equals_full_batch_gradient(spec_name, n, batch) -> None:
    x, y = batch
    expected = full_batch_gradient(spec_name, x, y)
    towers = TowerTrainer(ModelTask(model_spec(spec_name), SHAPE, 10), devices(n),
                          TrainerOptions(batch_per_device=len(x) // n, learning_rate=0.1))
    got = [g.numpy() for g in towers.averaged_gradients(tf.constant(x), tf.constant(y))]
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert np.abs(e).max() > 0  # the check would be empty on zero gradients
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-6)
    # and the slices really differ: one tower's gradient is not the average
    single, _, _ = towers.tower_gradients(tf.constant(x), tf.constant(y))
    assert not np.allclose(single[0][0].numpy(), got[0], rtol=1e-3)


def test_mirrored_allreduced_gradient_equals_full_batch_gradient(batch) -> None:
    x, y = batch
    expected = full_batch_gradient("cnn-small", x, y)
    mirrored = MirroredTrainer(ModelTask(model_spec("cnn-small"), SHAPE, 10), devices(2),
                               TrainerOptions(batch_per_device=8, learning_rate=0.1))
    got = mirrored.averaged_gradients(tf.constant(x), tf.constant(y))
    for g, e in zip(got, expected, strict=True):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-4, atol=1e-6)


# One process can hold MirroredStrategy collectives of one group size only (TensorFlow
# keys collective groups per process), so in-process mirrored tests all use 2 devices;
# test_towers_and_mirrored_agree_on_4_devices_in_a_child covers 4.
def test_towers_and_mirrored_apply_the_same_update(batch) -> None:
    x, y = batch
    n = 2
    task = ModelTask(model_spec("cnn-small"), SHAPE, 10)
    options = TrainerOptions(batch_per_device=len(x) // n, learning_rate=0.5, momentum=0.9)
    towers = TowerTrainer(task, devices(n), options)
    mirrored = MirroredTrainer(task, devices(n), options)
    before = [p.numpy() for p in towers.raw_params()]
    for _ in range(2):  # the second step exercises the momentum slots too
        towers.apply_batch(tf.constant(x), tf.constant(y))
        mirrored.apply_batch(tf.constant(x), tf.constant(y))
    after_t = [p.numpy() for p in towers.raw_params()]
    after_m = [p.numpy() for p in mirrored.raw_params()]
    for b, t, m in zip(before, after_t, after_m, strict=True):
        assert np.abs(t - b).max() > 1e-4  # the update moved the weights
        np.testing.assert_allclose(t, m, rtol=1e-4, atol=1e-6)
    # every mirrored copy holds the same weights
    for v in mirrored.model.params:
        copies = [c.numpy() for c in mirrored.strategy.experimental_local_results(v)]
        for c in copies[1:]:
            np.testing.assert_array_equal(c, copies[0])


UPDATE_4_SCRIPT = """
import sys
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 5)
import numpy as np
from gpudiag.train import data
from gpudiag.train.mirrored import MirroredTrainer
from gpudiag.train.model import ModelTask, model_spec
from gpudiag.train.towers import TowerTrainer, TrainerOptions
x, y = data.synthetic_arrays(32, seed=3)
devs = [f"/device:CPU:{i}" for i in range(1, 5)]
task = ModelTask(model_spec("cnn-small"), (28, 28, 1), 10)
options = TrainerOptions(batch_per_device=8, learning_rate=0.5, momentum=0.9)
t = TowerTrainer(task, devs, options)
m = MirroredTrainer(task, devs, options)
before = [p.numpy() for p in t.raw_params()]
for _ in range(2):
    t.apply_batch(tf.constant(x), tf.constant(y))
    m.apply_batch(tf.constant(x), tf.constant(y))
moved = min(float(np.abs(a.numpy() - b).max()) for a, b in zip(t.raw_params(), before))
diff = max(float(np.abs(a.numpy() - b.numpy()).max())
           for a, b in zip(t.raw_params(), m.raw_params()))
print(f"RESULT moved={moved} diff={diff}")
"""


def test_towers_and_mirrored_agree_on_4_devices_in_a_child() -> None:
    import os
    import subprocess
    import sys

    repo = REPO
    proc = subprocess.run([sys.executable, "-c", UPDATE_4_SCRIPT], capture_output=True,
                          text=True, timeout=180, cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT")]
    values = dict(kv.split("=") for kv in line.split()[1:])
    assert float(values["moved"]) > 1e-4
    assert float(values["diff"]) < 1e-5


def test_towers_place_each_tower_on_its_device_and_variables_where_asked(batch) -> None:
    x, y = batch
    for where, var_device in (("cpu", "/device:CPU:0"), ("device", "/device:CPU:1")):
        towers = TowerTrainer(ModelTask(model_spec("mlp"), SHAPE, 10), devices(2),
                              TrainerOptions(batch_per_device=8, learning_rate=0.1),
                              variables_on=where)
        assert {tf.DeviceSpec.from_string(v.device).device_index for v in towers.model.params} \
            == {int(var_device[-1])}
        it = towers.make_iterator(tf.data.Dataset.from_tensors((x, y)).repeat())
        graph = towers.step_graph(it)
        tower_ops = {}
        for op in graph.get_operations():
            if op.type in ("ReadVariableOp", "Placeholder"):
                continue  # variable reads run where the variable lives (resource colocation)
            for i in range(2):
                if op.name.startswith(f"tower_{i}/") or f"/tower_{i}/" in op.name:
                    tower_ops.setdefault(i, set()).add(op.device)
        assert set(tower_ops) == {0, 1}
        for i, found in tower_ops.items():
            assert all(d.endswith(f"CPU:{i + 1}") for d in found), (i, found)


@pytest.fixture(scope="module")
def short_run(tmp_path_factory) -> tuple[Path, TrainResult, TowerTrainer]:
    """A short towers run on 2 devices with every instrument on."""
    logdir = tmp_path_factory.mktemp("towers-2dev")
    probe = data_mod.synthetic(n_train=1024, n_eval=256)
    trainer = TowerTrainer(ModelTask(model_spec("cnn-small"), SHAPE, 10), devices(2),
                           TrainerOptions(batch_per_device=16, learning_rate=0.05,
                                          instrumentation=Instrumentation(histogram_every=5,
                                                                          ema_decay=0.9)))
    result = loop_mod.train(
        trainer, probe.train_dataset(trainer.global_batch), probe.eval_x, probe.eval_y,
        loop_mod.LoopConfig(steps=40, warmup_steps=4, profile_steps=3, logdir=logdir),
    )
    return logdir, result, trainer


def _events(logdir: Path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(logdir), size_guidance={"tensors": 0})
    acc.Reload()
    return acc


def test_run_learns_and_times_only_the_timed_steps(short_run) -> None:
    _, result, _ = short_run
    assert result.steps == 40 and len(result.step_s) == 40
    assert result.profiled_steps == [4, 5, 6]
    assert result.timed_steps == list(range(7, 40))
    expected = np.median([32 / result.step_s[i] for i in result.timed_steps])
    assert result.examples_per_s == pytest.approx(expected)
    assert result.losses[0] > 2.0 and result.final_loss < 1.0
    assert result.final_accuracy > 0.5 and result.eval_accuracy > 0.5
    assert result.eval_accuracy_ema is not None and result.eval_accuracy_ema > 0.3
    assert len(result.tower_losses_last) == 2


def test_event_files_hold_scalars_histograms_and_ema(short_run) -> None:
    logdir, result, trainer = short_run
    acc = _events(logdir)
    tags = set(acc.Tags()["tensors"])

    def plugin(tag: str) -> str:
        return acc.SummaryMetadata(tag).plugin_data.plugin_name

    for tag in (layout.TAG_TRAIN_LOSS, layout.TAG_TRAIN_ACCURACY,
                layout.TAG_TRAIN_LEARNING_RATE, layout.TAG_TRAIN_EXAMPLES_PER_S,
                layout.TAG_TRAIN_STEP_S, "towers/loss_0", "towers/loss_1"):
        assert tag in tags and plugin(tag) == "scalars", tag
        assert [e.step for e in acc.Tensors(tag)] == list(range(1, 41)), tag
    losses = [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(layout.TAG_TRAIN_LOSS)]
    np.testing.assert_allclose(losses, result.losses, rtol=1e-5)
    lrs = [float(tf.make_ndarray(e.tensor_proto))
           for e in acc.Tensors(layout.TAG_TRAIN_LEARNING_RATE)]
    assert lrs == pytest.approx([0.05] * 40)
    # full histograms of the first and the last layer's kernel only, at step 1 and every K
    names = trainer.model.param_names
    assert [names[i] for i in summaries.histogram_params(names)] == \
        ["conv1/kernel", "logits/kernel"]
    histogram_tags = {t for t in tags if plugin(t) == "histograms"}
    assert histogram_tags == {tag_of(n) for n in ("conv1/kernel", "logits/kernel")
                              for tag_of in (layout.gradient_tag, layout.variable_tag)}
    for tag in histogram_tags:
        events = acc.Tensors(tag)
        assert [e.step for e in events] == [1, 5, 10, 15, 20, 25, 30, 35, 40], tag
        buckets = tf.make_ndarray(events[-1].tensor_proto)
        assert buckets.shape[1] == 3 and buckets[:, 2].sum() > 0
    # the last variable histogram is of the final weights
    kernel = trainer.model.params[0].numpy()
    hist = tf.make_ndarray(acc.Tensors(layout.variable_tag("conv1/kernel"))[-1]
                           .tensor_proto)
    assert hist[0, 0] == pytest.approx(kernel.min(), rel=1e-5)
    assert hist[-1, 1] == pytest.approx(kernel.max(), rel=1e-5)
    # the global norms, every step; the last EMA norm is that of the final averages
    for tag in (layout.TAG_NORM_GRADIENTS, layout.TAG_NORM_EMA):
        assert plugin(tag) == "scalars" and [e.step for e in acc.Tensors(tag)] == \
            list(range(1, 41)), tag
    norms = {tag: [float(tf.make_ndarray(e.tensor_proto)) for e in acc.Tensors(tag)]
             for tag in (layout.TAG_NORM_GRADIENTS, layout.TAG_NORM_EMA)}
    assert all(v > 0 for v in norms[layout.TAG_NORM_GRADIENTS])
    # the towers' average takes a step's weights at the start of the next step, so the
    # norm logged at step 40 is that of the average through step 39: the final average
    # (synced after the loop) without the last update, d = min(0.9, 41 / 50)
    d = min(0.9, 41 / 50)
    before_last = [(a.numpy() - (1 - d) * w.numpy()) / d
                   for a, w in zip(trainer.ema_params(), trainer.raw_params(), strict=True)]
    norm_39 = np.sqrt(sum(float(np.sum(a ** 2)) for a in before_last))
    assert norms[layout.TAG_NORM_EMA][-1] == pytest.approx(norm_39, rel=1e-4)
    for tag, value in ((layout.TAG_EVAL_ACCURACY, result.eval_accuracy),
                       (layout.TAG_EVAL_ACCURACY_EMA, result.eval_accuracy_ema)):
        (event,) = acc.Tensors(tag)
        assert float(tf.make_ndarray(event.tensor_proto)) == pytest.approx(value)
    # the configuration is the parent's HParams session now, not a text card per run
    assert not {t for t in tags if plugin(t) in ("text", "hparams")}


def test_gradient_norm_is_the_averaged_gradients_norm(batch) -> None:
    """The logged gradient norm of one step is the global norm of the gradient the update
    applies (towers.averaged_gradients of the same batch, before the update)."""
    x, y = batch
    trainer = TowerTrainer(ModelTask(model_spec("mlp"), SHAPE, 10), devices(2),
                           TrainerOptions(batch_per_device=8, learning_rate=0.05,
                                          instrumentation=Instrumentation(ema_decay=0.9)))
    expected = np.sqrt(sum(float(np.sum(g.numpy() ** 2)) for g in
                           trainer.averaged_gradients(tf.constant(x), tf.constant(y))))
    out = trainer.run_step(iter(tf.data.Dataset.from_tensors((x, y))))
    assert float(out["norms"][0]) == pytest.approx(expected, rel=1e-5)
    assert "norms" not in TowerTrainer(
        ModelTask(model_spec("mlp"), SHAPE, 10), devices(2),
        TrainerOptions(batch_per_device=8, learning_rate=0.05,
                       instrumentation=Instrumentation.off())).run_step(
            iter(tf.data.Dataset.from_tensors((x, y))))


def test_fused_ema_update_is_tf_trains_update() -> None:
    """summaries.apply_ema gives the averages ExponentialMovingAverage.apply gives, with
    num_updates' warm-up, step after step."""
    rng = np.random.default_rng(3)
    start = [rng.normal(size=s).astype(np.float32) for s in ((3, 4), (4,))]

    def state() -> tuple[list[tf.Variable], tf.Variable, tf.train.ExponentialMovingAverage]:
        params = [tf.Variable(a) for a in start]
        step = tf.Variable(0, dtype=tf.int64)
        ema = summaries.make_ema(0.9, step)
        assert ema is not None
        ema.apply(params)
        return params, step, ema

    ref_params, ref_step, ref_ema = state()
    params, step, ema = state()

    @tf.function
    def reference(delta: tf.Tensor) -> None:
        for p in ref_params:
            p.assign_add(tf.fill(tf.shape(p), delta))
        ref_step.assign_add(1)
        ref_ema.apply(ref_params)

    @tf.function
    def fused(delta: tf.Tensor) -> None:
        for p in params:
            p.assign_add(tf.fill(tf.shape(p), delta))
        summaries.apply_ema(ema, 0.9, step.assign_add(1), params)

    for delta in (0.5, -0.25, 1.0, 0.125):
        reference(tf.constant(delta))
        fused(tf.constant(delta))
        for a, b in zip(ref_params, params, strict=True):
            np.testing.assert_allclose(ema.average(b).numpy(), ref_ema.average(a).numpy(),
                                       rtol=1e-6, atol=1e-7)
    assert not np.allclose(ema.average(params[0]).numpy(), params[0].numpy())


def test_towers_moving_average_is_the_per_step_average_after_sync(batch) -> None:
    """The towers bring the average up to a step's weights at the start of the next step;
    after sync_ema it is exactly the average of every step's weights, as
    ExponentialMovingAverage.apply after each update would have it, and a second sync
    changes nothing."""
    x, y = batch
    trainer = TowerTrainer(ModelTask(model_spec("mlp"), SHAPE, 10), devices(2),
                           TrainerOptions(batch_per_device=8, learning_rate=0.1,
                                          instrumentation=Instrumentation(histogram_every=0,
                                                                          ema_decay=0.9)))
    iterator = iter(tf.data.Dataset.from_tensors((x, y)).repeat())
    shadow = [p.numpy() for p in trainer.raw_params()]
    for n in range(1, 6):
        trainer.run_step(iterator)
        d = min(0.9, (1 + n) / (10 + n))
        shadow = [d * s + (1 - d) * w.numpy()
                  for s, w in zip(shadow, trainer.raw_params(), strict=True)]
    trainer.sync_ema()
    for _ in range(2):
        for got, want in zip(trainer.ema_params(), shadow, strict=True):
            np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
        assert int(trainer.ema_step.numpy()) == 5
        trainer.sync_ema()


def test_ema_follows_tf_train_semantics(short_run) -> None:
    """The averages differ from the weights but stay close: decay 0.9 with num_updates."""
    _, _, trainer = short_run
    for w, a in zip(trainer.raw_params(), trainer.ema_params(), strict=True):
        w, a = w.numpy(), a.numpy()
        if np.abs(w).max() == 0:
            continue
        assert not np.allclose(w, a)
        assert np.abs(w - a).max() < np.abs(w).max()


def test_checkpoint_restores_weights_optimizer_and_ema(short_run) -> None:
    logdir, result, trainer = short_run
    assert result.checkpoint_path and Path(result.checkpoint_path + ".index").exists()
    fresh = TowerTrainer(ModelTask(model_spec("cnn-small"), SHAPE, 10), devices(2),
                         TrainerOptions(batch_per_device=16, learning_rate=0.05, seed=123,
                                        instrumentation=Instrumentation(histogram_every=5,
                                                                        ema_decay=0.9)))
    assert not np.allclose(fresh.raw_params()[0].numpy(), trainer.raw_params()[0].numpy())
    latest = tf.train.latest_checkpoint(str(logdir / layout.CHECKPOINT_DIR))
    assert latest == result.checkpoint_path
    fresh.checkpoint().restore(latest).assert_existing_objects_matched()
    assert int(fresh.step.numpy()) == 40
    for a, b in zip(fresh.raw_params(), trainer.raw_params(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(fresh.ema_params(), trainer.ema_params(), strict=True):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    for a, b in zip(fresh.optimizer.variables, trainer.optimizer.variables, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


def test_profiler_trace_shows_work_on_every_tower(short_run) -> None:
    logdir, result, _ = short_run
    (xplane,) = traces.find_xplanes(logdir)
    assert set(result.op_devices.values()) >= {"/device:CPU:1", "/device:CPU:2"}
    summary = traces.summarize(xplane, result.op_devices, ["/device:CPU:1", "/device:CPU:2"])
    assert summary.step_markers == 3
    assert summary.window_s > 0
    busy = summary.busy_by_device()
    assert {"/device:CPU:1", "/device:CPU:2"} <= set(busy)
    assert all(busy[d] > 0 for d in ("/device:CPU:1", "/device:CPU:2"))
    assert all(d.event_count > 10 for d in summary.devices if d.device != "/device:CPU:0")
    assert summary.input_wait_s > 0  # IteratorGetNext runs inside the towers' step
    assert summary.communication_s > 0  # the average_gradients scope
    assert summary.top_ops and summary.top_ops[0].total_s > 0


# Further MirroredStrategy instances with other variable shapes collide with the ones
# above on TensorFlow's per-process collective keys, so these runs go to children, as
# gpudiag itself runs every configuration in its own process.
RUN_SCRIPT = """
import json, sys
from pathlib import Path
import tensorflow as tf
cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 3)
from gpudiag.train import data, loop
from gpudiag.train.model import ModelTask, model_spec
from gpudiag.train.summaries import Instrumentation
from gpudiag.train.towers import TrainerOptions
strategy, logdir = sys.argv[1], Path(sys.argv[2])
probe = data.synthetic(n_train=512, n_eval=128)
devs = ["/device:CPU:1", "/device:CPU:2"]
instr = Instrumentation(histogram_every=4, ema_decay=0.9)
cfg = loop.LoopConfig(steps=12, warmup_steps=2, profile_steps=2, logdir=logdir)
task = ModelTask(model_spec("mlp"), (28, 28, 1), 10)
options = TrainerOptions(batch_per_device=16, learning_rate=0.1, instrumentation=instr)
if strategy == "keras":
    from gpudiag.train.keras_fit import train_keras
    result = train_keras(task, devs, probe.train_dataset(32), probe.eval_x, probe.eval_y, cfg,
                         options)
else:
    from gpudiag.train.mirrored import MirroredTrainer
    trainer = MirroredTrainer(task, devs, options)
    result = loop.train(trainer, probe.train_dataset(32), probe.eval_x, probe.eval_y, cfg)
print("RESULT " + json.dumps(result.to_dict()))
"""


def run_in_child(strategy: str, logdir: Path) -> dict:
    import json
    import os
    import subprocess
    import sys

    repo = REPO
    proc = subprocess.run([sys.executable, "-c", RUN_SCRIPT, strategy, str(logdir)],
                          capture_output=True, text=True, timeout=240, cwd=repo,
                          env={**os.environ, "PYTHONPATH": str(repo)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    return json.loads(line[len("RESULT "):])


def test_mirrored_run_writes_the_same_tags(tmp_path) -> None:
    result = run_in_child("mirrored", tmp_path)
    assert result["steps"] == 12 and result["strategy"] == "mirrored"
    acc = _events(tmp_path)
    tags = set(acc.Tags()["tensors"])
    assert {layout.replica_loss_tag(0), layout.replica_loss_tag(1), "gradients/dense/kernel",
            "variables/dense/kernel", "gradients/logits/kernel", layout.TAG_NORM_GRADIENTS,
            layout.TAG_NORM_EMA, layout.TAG_EVAL_ACCURACY_EMA,
            layout.TAG_TRAIN_EXAMPLES_PER_S} <= tags
    assert not [t for t in tags if t.startswith(("towers/", "ema/"))]  # replicas, not towers
    assert [e.step for e in acc.Tensors("gradients/dense/kernel")] == [1, 4, 8, 12]
    assert [e.step for e in acc.Tensors(layout.TAG_NORM_GRADIENTS)] == list(range(1, 13))
    assert result["ops_by_device"]["/device:CPU:1"] > 0
    assert result["ops_by_device"]["/device:CPU:2"] > 0
    (xplane,) = traces.find_xplanes(tmp_path)
    busy = traces.summarize(xplane, result["op_devices"], result["devices"]).busy_by_device()
    assert all(busy[d] > 0 for d in result["devices"])
    assert tf.train.latest_checkpoint(str(tmp_path / layout.CHECKPOINT_DIR))


def test_keras_fit_under_mirrored_strategy(tmp_path) -> None:
    result = run_in_child("keras", tmp_path)
    assert result["steps"] == 12 and len(result["step_s"]) == 12  # stopped mid-epoch
    assert result["examples_per_s"] and result["examples_per_s"] > 0
    assert result["eval_accuracy_ema"] is not None
    assert result["checkpoint_path"] and Path(result["checkpoint_path"] + ".index").exists()
    train_events = _events(tmp_path / "train")
    train_tags = set(train_events.Tags()["tensors"])
    assert "batch_loss" in train_tags
    assert any(t.endswith("histogram") for t in train_tags)  # Keras's weight histograms
    assert layout.TAG_TRAIN_EXAMPLES_PER_S in set(_events(tmp_path).Tags()["tensors"])
    (xplane,) = traces.find_xplanes(tmp_path)
    busy = traces.summarize(xplane, result["op_devices"], result["devices"]).busy_by_device()
    assert all(busy[d] > 0 for d in result["devices"])
