"""gpudiag.watch() and %%gpudiag in a real Jupyter kernel (ipykernel driven by nbclient).

Two notebooks run the same cells, one with the training cell under ``gpudiag.watch()``,
one plainly (the baseline). TensorFlow is imported and the model built in an earlier cell,
as a notebook does; the watched cell builds a tf.data pipeline with an expensive map and
no parallelism (tests/programs/input_pipeline_fit.py's; the setup cell is the documented
notebook's own, docs/notebook.ipynb) and fits. Checked: the diagnosis
names input as the bottleneck and the cell's line (In[2] line 3, the file the kernel gives
the cell); the cell's own output and result are the plain run's; after the block no gpudiag
hook is left in the kernel (sys.meta_path, the patched functions, gpudiag's threads); a
cell run afterwards gives the plain run's output; the block's exception passes through
unchanged; ``%load_ext gpudiag`` + ``%%gpudiag`` does the same for one cell.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from gpudiag.rundir.load import load_run

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

pytestmark = pytest.mark.slow

FIT_WARMUP = 60  # 48 batches an epoch: the profiled steps in the second epoch

LEFT = """\
import json, sys, threading, warnings, logging

def gpudiag_left():
    \"\"\"Every attribute of TensorFlow's, Keras's and Python's modules (and their classes)
    that is one of gpudiag's wrappers or functions.\"\"\"
    import types
    found = []
    def mine(v):
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if not isinstance(v, (types.FunctionType, types.MethodType)):
            return False
        return (getattr(v, "__module__", None) or "").startswith("gpudiag") or \\
            "__gpudiag_wrapped__" in getattr(v, "__dict__", {})
    for name, mod in list(sys.modules.items()):
        if not (name.split(".")[0] in ("tensorflow", "keras", "tf_keras", "warnings",
                                       "logging", "sys", "threading", "importlib")):
            continue
        for attr, v in list(vars(mod).items()):
            if mine(v):
                found.append(f"{name}.{attr}")
            if isinstance(v, type) and v.__module__ == name:
                found += [f"{name}.{v.__name__}.{a}" for a, w in list(vars(v).items())
                          if mine(w)]
    found += [f"logger.{a}" for a in vars(logging.getLogger("tensorflow"))
              if a in ("handle", "isEnabledFor")]
    return sorted(set(found))
"""


def _documented_setup() -> str:
    """docs/notebook.ipynb's first code cell (scripts/notebook_doc.py writes it): the data,
    the expensive map and the model the documented notebook builds, built the same here."""
    notebook = nbformat.read(REPO / "docs" / "notebook.ipynb", as_version=4)
    return next(c.source for c in notebook.cells if c.cell_type == "code")


SETUP = LEFT + _documented_setup() + """

def hooked():
    \"\"\"What gpudiag's hooks replace, as the kernel holds it now.\"\"\"
    from tensorflow.python.data.ops import dataset_ops, iterator_ops
    from tensorflow.python.eager.polymorphic_function import polymorphic_function as pf
    from tensorflow.python.eager.polymorphic_function import tracing_compilation as tc
    from tensorflow.python.eager import backprop, context
    owners = {"Model": tf.keras.Model, "DatasetV2": dataset_ops.DatasetV2,
              "Function": pf.Function, "OwnedIterator": iterator_ops.OwnedIterator,
              "GradientTape": backprop.GradientTape, "Context": context.Context,
              "tf": tf, "tracing_compilation": tc, "warnings": warnings, "sys": sys,
              "threading": threading, "tf.config": tf.config,
              "tf.config.experimental": tf.config.experimental,
              "tf.debugging": tf.debugging,
              "tensorflow logger": logging.getLogger("tensorflow")}
    return {(k, n): v for k, o in owners.items() for n, v in vars(o).items()}

model = make_model()
before = hooked()
meta_before = list(sys.meta_path)
"""

TRAIN = """\
dataset = tf.data.Dataset.from_tensor_slices((x, y))
dataset = dataset.map(augment).batch(32)
history = model.fit(dataset, epochs=3, verbose=0)
print("losses", [round(v, 4) for v in history.history["loss"]])
len(history.history["loss"])"""
MAP_LINE = 2  # in TRAIN; the watched cell's line 3 (after its `with` line)

WATCHED = f"with gpudiag.watch({{logdir!r}}, profile_warmup_steps={FIT_WARMUP}) as w:\n" + \
    "\n".join("    " + ln for ln in TRAIN.splitlines()[:3]) + "\n" + \
    "\n".join(TRAIN.splitlines()[3:])

CHECK = """\
from gpudiag.inprogram import agent as gpudiag_agent
after = hooked()
changed = sorted(f"{k[0]}.{k[1]}" for k in set(before) | set(after)
                 if before.get(k, "missing") is not after.get(k, "missing")
                 and before.get(k, "missing") != after.get(k, "missing"))
print(json.dumps({"changed": changed, "left": gpudiag_left(),
                  "meta_path_same": list(sys.meta_path) == meta_before,
                  "threads": sorted(t.name for t in threading.enumerate()
                                    if t.name.startswith("gpudiag")),
                  "agent": gpudiag_agent.AGENT is not None,
                  "patches": len(gpudiag_agent.PATCHES),
                  "run_dir": str(w.run_dir), "error": w.error,
                  "cells": w.result.cells}))"""

PLAIN_CHECK = "print('no watch')"

AFTER = """\
tf.keras.utils.set_random_seed(1)
second = make_model()
h2 = second.fit(tf.data.Dataset.from_tensor_slices((x, y)).batch(64), epochs=2, verbose=0)
print("second", [round(v, 5) for v in h2.history["loss"]])
second.predict(x[:2], verbose=0).round(4).tolist()"""

RAISES = """\
with gpudiag.watch({logdir!r}) as w_err:
    small = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
    raise ValueError("the cell's own error")"""
RAISES_PLAIN = """\
small = tf.data.Dataset.from_tensor_slices((x, y)).batch(32)
raise ValueError("the cell's own error")"""
AFTER_RAISE = "print(json.dumps({'run_dir': str(w_err.run_dir), 'left': gpudiag_left()}))"

MAGIC = f"""\
%%gpudiag --logdir {{logdir}} --profile-warmup {FIT_WARMUP}
dataset = tf.data.Dataset.from_tensor_slices((x, y))
dataset = dataset.map(augment).batch(32)
history = make_model().fit(dataset, epochs=3, verbose=0)
print("magic", len(history.history["loss"]))"""
MAGIC_BAD = "%%gpudiag --bogus 3\nprint('ran anyway')"


FRESH_TRAIN = """\
with gpudiag.watch({logdir!r}, profile_warmup_steps=4, profile_steps=2) as w:
    import numpy as np
    import tensorflow as tf
    data = np.random.default_rng(0).standard_normal((256, 8)).astype("float32")
    labels = (data[:, 0] > 0).astype("int64")
    tf.keras.utils.set_random_seed(0)  # a fit that clearly learns, whatever the draw
    fresh = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(2)])
    fresh.compile(tf.keras.optimizers.SGD(0.5),
                  tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    fresh.fit(tf.data.Dataset.from_tensor_slices((data, labels)).batch(16), epochs=3,
              verbose=0)"""
FRESH_CHECK = "print(json.dumps({'run_dir': str(w.run_dir), 'left': gpudiag_left()}))"
INTERRUPTED = """\
with gpudiag.watch({logdir!r}) as w_int:
    raise KeyboardInterrupt"""
INTERRUPTED_CHECK = "print(json.dumps({'run_dir': str(w_int.run_dir), 'left': gpudiag_left()}))"


WRAPPED = """\
with gpudiag.watch({logdir!r}, show=False) as w_wrap:
    hooked_fit = tf.keras.Model.fit
    def user_fit(self, *args, **kwargs):  # as mlflow.autolog() or a user's wrapper does
        return hooked_fit(self, *args, **kwargs)
    tf.keras.Model.fit = user_fit
    fresh.fit(tf.data.Dataset.from_tensor_slices((data, labels)).batch(16), epochs=1,
              verbose=0)
import glob, os
events = sorted(glob.glob(os.path.join(str(w_wrap.run_dir), "**", "events-*.jsonl"),
                          recursive=True))
sizes = [os.path.getsize(e) for e in events]
fresh.fit(tf.data.Dataset.from_tensor_slices((data, labels)).batch(16), epochs=1, verbose=0)
held = [os.readlink(f"/proc/self/fd/{{fd}}") for fd in os.listdir("/proc/self/fd")
        if os.path.exists(f"/proc/self/fd/{{fd}}")]
print(json.dumps({{"events": len(events), "sizes": sizes,
                  "after": [os.path.getsize(e) for e in events],
                  "held": [p for p in held if str(w_wrap.run_dir) in p],
                  "still_wrapped": tf.keras.Model.fit is user_fit,
                  "run_dir": str(w_wrap.run_dir), "error": w_wrap.error}}))"""


@dataclass
class Executed:
    cells: list[Any]  # nbformat cells with their outputs

    def outputs(self, i: int, kind: str | None = None) -> list[Any]:
        return [o for o in self.cells[i].outputs if kind is None or o.output_type == kind]

    def stream(self, i: int, name: str) -> str:
        return "".join(o.text for o in self.outputs(i, "stream") if o.name == name)

    def json_line(self, i: int) -> dict[str, Any]:
        last = self.stream(i, "stdout").strip().splitlines()[-1]
        return json.loads(last)

    def displays(self, i: int) -> list[dict[str, Any]]:
        return [o.data for o in self.outputs(i, "display_data")]


def execute(sources: list[str], cwd: Path) -> Executed:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    client = nbclient.NotebookClient(nb, timeout=240, kernel_name="python3",
                                     allow_errors=True,
                                     resources={"metadata": {"path": str(cwd)}})
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    client.execute(env={**os.environ, "PYTHONPATH": pythonpath})
    return Executed(nb.cells)


@pytest.fixture(scope="module")
def watched(tmp_path_factory: pytest.TempPathFactory) -> tuple[Executed, Path]:
    tmp = tmp_path_factory.mktemp("watched")
    logdir = tmp / "runs"
    return execute([SETUP, WATCHED.format(logdir=str(logdir)), CHECK, AFTER,
                    RAISES.format(logdir=str(logdir)), AFTER_RAISE, "%load_ext gpudiag",
                    MAGIC.format(logdir=str(logdir / "magic")), MAGIC_BAD], tmp), logdir


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    tmp = tmp_path_factory.mktemp("plain")
    return execute([SETUP, TRAIN, PLAIN_CHECK, AFTER, RAISES_PLAIN], tmp)


@pytest.fixture(scope="module")
def fresh(tmp_path_factory: pytest.TempPathFactory) -> Executed:
    """A kernel that imports TensorFlow inside the watched block."""
    tmp = tmp_path_factory.mktemp("fresh")
    logdir = str(tmp / "runs")
    return execute([LEFT + "import gpudiag", FRESH_TRAIN.format(logdir=logdir), FRESH_CHECK,
                    INTERRUPTED.format(logdir=logdir), INTERRUPTED_CHECK,
                    WRAPPED.format(logdir=str(tmp / "wrapped"))], tmp)


def _not_gpudiag(outputs: list[Any]) -> list[dict[str, Any]]:
    """A cell's outputs without the diagnosis gpudiag displays."""
    return [{k: v for k, v in o.items() if k != "execution_count"} for o in outputs
            if not (o.output_type == "display_data" and "gpudiag" in o.data.get("text/plain",
                                                                                ""))]


def test_the_diagnosis_names_input_and_the_cells_line(watched: tuple[Executed, Path]) -> None:
    nb, _ = watched
    state = nb.json_line(2)
    run = load_run(Path(state["run_dir"]))
    assert run.command == "run" and run.status == "complete"
    f = run.finding("run.bottleneck")
    assert f is not None and f["status"] == "warn", f
    assert f["evidence"]["causes"][0] == "input-bound"
    cell_file = next(name for name, n in state["cells"].items() if n == 2)
    assert f"Dataset.map(augment) at {Path(cell_file).name}:{MAP_LINE + 1}" in f["advice"]
    assert "num_parallel_calls=tf.data.AUTOTUNE" in f["advice"]
    shown = nb.displays(1)
    assert len(shown) == 1
    page, text = shown[0]["text/html"], shown[0]["text/plain"]
    assert f"Dataset.map(augment) at In[2] line {MAP_LINE + 1}" in page
    assert f"fix at In[2] line {MAP_LINE + 1}" in text
    assert "<svg" in page and "data:image/png;base64," in page  # loss curve, step parts
    links = re.findall(r'(?:src|href)\s*=\s*["\']([^"\']*)', page)
    assert links and all(u.startswith("data:") for u in links), links  # nothing fetched
    unseen = run.finding("run.notebook")
    assert unseen is not None and unseen["evidence"]["imported_before"] == [
        "tensorflow", "keras"]
    assert any("TensorFlow's import" in u for u in unseen["evidence"]["unseen"])
    assert "not seen: TensorFlow's import" in text
    learning = run.finding("run.learning")
    assert learning is not None and learning["status"] == "ok", learning


def test_the_watched_cell_prints_and_returns_what_it_does_plainly(
        watched: tuple[Executed, Path], plain: Executed) -> None:
    nb, _ = watched
    assert _not_gpudiag(nb.outputs(1)) == _not_gpudiag(plain.outputs(1))
    assert nb.outputs(1, "execute_result")[0].data["text/plain"] == "3"
    assert "GPUDIAG" not in nb.stream(1, "stderr")
    assert "Profiler session" not in nb.stream(1, "stderr")  # gpudiag's own TF calls


def test_after_the_block_no_hook_is_left(watched: tuple[Executed, Path]) -> None:
    nb, _ = watched
    state = nb.json_line(2)
    assert state["error"] is None
    assert state["changed"] == [], state["changed"]
    assert state["left"] == [], state["left"]
    assert state["meta_path_same"] is True
    assert state["threads"] == []
    assert state["agent"] is False and state["patches"] == 0


def test_a_cell_after_the_block_runs_as_without_gpudiag(watched: tuple[Executed, Path],
                                                        plain: Executed) -> None:
    nb, _ = watched
    assert _not_gpudiag(nb.outputs(3)) == _not_gpudiag(plain.outputs(3))
    assert nb.stream(3, "stdout").startswith("second [")


def test_the_blocks_exception_passes_through_unchanged(watched: tuple[Executed, Path],
                                                       plain: Executed) -> None:
    nb, _ = watched
    error = nb.outputs(4, "error")
    plain_error = plain.outputs(4, "error")
    assert [(e.ename, e.evalue) for e in error] == [("ValueError", "the cell's own error")]
    assert [(e.ename, e.evalue) for e in plain_error] == [("ValueError", "the cell's own error")]
    assert "gpudiag" not in "\n".join(error[0].traceback).replace("gpudiag.watch", "")
    state = nb.json_line(5)
    assert state["left"] == []
    crash = load_run(Path(state["run_dir"])).finding("run.crash")
    assert crash is not None and crash["status"] == "fail"
    assert "ValueError" in crash["message"]


def test_the_cell_magic_diagnoses_its_cell(watched: tuple[Executed, Path]) -> None:
    nb, logdir = watched
    assert "magic 3" in nb.stream(7, "stdout")
    shown = nb.displays(7)
    assert len(shown) == 1
    assert f"fix at In[8] line {MAP_LINE}" in shown[0]["text/plain"]  # the magic's line
    runs = sorted((logdir / "magic").iterdir())  # is not the cell's code
    assert len(runs) == 1
    f = load_run(runs[0]).finding("run.bottleneck")
    assert f is not None and f["evidence"]["causes"][0] == "input-bound"
    # a bad option: one line, the cell runs unwatched
    assert nb.stream(8, "stdout") == "ran anyway\n"
    err = nb.stream(8, "stderr").strip().splitlines()
    assert len(err) == 1 and err[0].startswith("gpudiag: unknown option '--bogus'"), err


def test_tensorflow_imported_inside_the_block_is_seen_whole(fresh: Executed) -> None:
    state = fresh.json_line(2)
    assert state["left"] == []
    run = load_run(Path(state["run_dir"]))
    unseen = run.finding("run.notebook")
    assert unseen is not None and unseen["status"] == "ok"
    assert unseen["evidence"]["imported_before"] == []
    assert unseen["evidence"]["unseen"] == []
    devices = run.finding("run.devices")
    assert devices is not None and "CPU:0" in devices["message"], devices
    tf_seen = run.finding("run.tensorflow")
    assert tf_seen is not None and tf_seen["status"] == "ok", tf_seen
    assert run.finding("run.learning")["status"] == "ok"  # type: ignore[index]
    placement = run.finding("run.placement")  # the placement window, without the C++ log
    assert placement is not None and placement["status"] == "ok", placement


def test_an_interrupted_block_is_reported_and_the_interrupt_goes_on(fresh: Executed) -> None:
    errors = fresh.outputs(3, "error")
    assert [e.ename for e in errors] == ["KeyboardInterrupt"]
    state = fresh.json_line(4)
    assert state["left"] == []
    run = load_run(Path(state["run_dir"]))
    assert run.status == "interrupted"
    command = run.finding("run.command")
    assert command is not None and command["status"] == "warn", command


def test_a_fit_the_block_wrapped_writes_nothing_after_it(fresh: Executed) -> None:
    """The block wraps Model.fit (as mlflow.autolog() does), so the wrapper keeps gpudiag's
    hook past the block: a fit after it goes through the hook, which passes straight to
    Keras's fit: the finished run's events file neither grows nor is held open."""
    state = fresh.json_line(5)
    assert state["error"] is None and state["still_wrapped"] is True
    assert state["events"] >= 1 and state["after"] == state["sizes"], state
    assert state["held"] == [], state
    assert load_run(Path(state["run_dir"])).status == "complete"
