"""Run docs/notebook.ipynb, the example of docs/notebook.md, in a real Jupyter kernel and
write it back with its outputs (and the first diagnosis's step picture under docs/images/).

    PYTHONPATH=. python scripts/notebook_doc.py

The notebook runs in a temporary directory (its run directories go to runs/ there); the
text outputs are printed, for docs/notebook.md.
"""

from __future__ import annotations

import base64
import os
import re
import sys
import tempfile
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "docs" / "notebook.ipynb"
PICTURE = REPO / "docs" / "images" / "notebook-breakdown.png"

CELLS = [
    ("markdown", "# gpudiag in a notebook\n\nTensorFlow, the data and the model come from "
                 "earlier cells, as in most notebooks; the training cell runs under "
                 "`gpudiag.watch()`."),
    ("code", """\
import numpy as np
import tensorflow as tf
import gpudiag

tf.keras.utils.set_random_seed(0)
rng = np.random.default_rng(0)
x = rng.standard_normal((1536, 16)).astype("float32")
y = x[:, :4].argmax(axis=1)
W = tf.constant(rng.standard_normal((48, 48)).astype("float32") * 0.1)


def augment(features, label):  # an expensive per-example transformation
    m = tf.tile(tf.reshape(features, (1, 16)), (48, 3))
    for _ in range(150):
        m = tf.tanh(tf.matmul(m, W))
    return features + tf.reduce_mean(m) * 1e-3, label


def make_model():
    model = tf.keras.Sequential([tf.keras.Input((16,)),
                                 tf.keras.layers.Dense(32, activation="relu"),
                                 tf.keras.layers.Dense(4)])
    model.compile("sgd", tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    return model"""),
    ("code", """\
with gpudiag.watch(profile_warmup_steps=60) as w:
    dataset = tf.data.Dataset.from_tensor_slices((x, y))
    dataset = dataset.map(augment).batch(32)
    history = make_model().fit(dataset, epochs=3, verbose=0)"""),
    ("markdown", "The diagnosis is also kept: `w.result` (its text form below), and the "
                 "run directory `w.run_dir` is the one `gpudiag run` writes "
                 "(`gpudiag tensorboard runs` shows it in the GPUDIAG tab)."),
    ("code", "print(w.result)"),
    ("markdown", "The fix, in one cell with the `%%gpudiag` magic:"),
    ("code", "%load_ext gpudiag"),
    ("code", """\
%%gpudiag --profile-warmup 60
dataset = tf.data.Dataset.from_tensor_slices((x, y))
dataset = dataset.map(augment, num_parallel_calls=tf.data.AUTOTUNE).cache()
dataset = dataset.batch(32).prefetch(tf.data.AUTOTUNE)
history = make_model().fit(dataset, epochs=3, verbose=0)"""),
]


def main() -> int:
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3",
                                 "language": "python"}
    for kind, source in CELLS:
        nb.cells.append(nbformat.v4.new_code_cell(source) if kind == "code"
                        else nbformat.v4.new_markdown_cell(source))
    with tempfile.TemporaryDirectory() as tmp:
        pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": tmp}}).execute(
            env={**os.environ, "PYTHONPATH": pythonpath})
    nbformat.write(nb, NOTEBOOK)
    picture = None
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.output_type == "display_data" and "text/plain" in out.data:
                print(f"--- cell {i} display (text/plain)\n{out.data['text/plain']}")
                found = re.search(r'src="data:image/png;base64,([^"]+)"',
                                  out.data.get("text/html", ""))
                if found and picture is None:
                    picture = base64.b64decode(found.group(1))
            elif out.output_type == "stream" and out.name == "stdout":
                print(f"--- cell {i} stdout\n{out.text}")
            elif out.output_type == "error":
                print(f"--- cell {i} error {out.ename}: {out.evalue}")
                return 1
    if picture is not None:
        PICTURE.write_bytes(picture)
    print(f"wrote {NOTEBOOK.relative_to(REPO)}" + (f" and {PICTURE.relative_to(REPO)}"
                                                    if picture else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
