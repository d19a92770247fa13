"""Advice that fits the map (issue 35, item 7): no .cache() after a map that draws random
numbers (the augmentation would freeze); a map running Python through tf.py_function /
tf.numpy_function is told the GIL serialises it and that vectorising is the fix. Plain
data as the hooks record a map's traced ops, and real programs under `gpudiag run`
(tests/programs/augment_map_fit.py)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import TESTS_DIR, ProgramRun, run_program

from gpudiag.records.run import DatasetCall

PROGRAM = TESTS_DIR / "programs" / "augment_map_fit.py"


def call(method: str, line: int, output: int, input_: int | None = None,
         function: dict[str, Any] | None = None, **args: object) -> DatasetCall:
    fn = {"name": "augment", "file": "/u/train.py", "line": 3, "user": True,
          **(function or {})}
    return DatasetCall(method, dict(args), fn, input_, output,
                       {"file": "/u/train.py", "line": line, "function": "<module>",
                        "code": f"line {line}", "direct": True})


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ProgramRun]:
    out = {}
    for mode in ("random", "pyfunc"):
        r = run_program(tmp_path_factory.mktemp(mode), sys.executable, str(PROGRAM), mode,
                        options=("--profile-warmup", "60"))
        assert r.returncode == 0, r.stderr[-2000:]
        out[mode] = r
    return out


def _line(text: str) -> int:
    return next(i for i, t in enumerate(PROGRAM.read_text().splitlines(), 1)
                if t.strip().startswith(text))


def _bottleneck(r: ProgramRun) -> dict[str, Any]:
    (f,) = [f for f in r.report["findings"] if f["id"] == "run.bottleneck"]
    return f


@pytest.mark.slow
def test_a_keras_augmentation_map_under_gpudiag_run_is_not_told_to_cache(runs) -> None:
    f = _bottleneck(runs["random"])
    line = _line("dataset = dataset.map(augment)")
    (mapped,) = [c for c in f["evidence"]["dataset_calls"] if c["method"] == "map"]
    assert {"RandomUniform", "StatelessRandomUniformV2"} <= set(mapped["random_ops"])
    assert f"no .cache() after the map at augment_map_fit.py:{line}" in f["advice"]
    assert "maps it once" not in f["advice"]
    assert "cache" not in (f["evidence"]["predicted"].get("fix") or "")
    assert not any("call .cache()" in a["what"] for a in f["actions"])


@pytest.mark.slow
def test_a_py_function_map_under_gpudiag_run_is_told_the_gil_and_to_vectorise(runs) -> None:
    f = _bottleneck(runs["pyfunc"])
    line = _line("dataset = dataset.map(through_python")
    assert f["evidence"]["causes"][0] == "input-bound"
    assert f"Dataset.map(through_python) at augment_map_fit.py:{line}" in f["advice"]
    assert "Python's GIL runs it one element at a time" in f["advice"]
    (vectorise,) = [a for a in f["actions"] if a["what"].startswith("vectorise the map")]
    assert vectorise["where"] == f"augment_map_fit.py:{line}"
    sized = [a for a in f["actions"] if a["predicted"] is not None]
    assert len(sized) <= 1 and all(a is not vectorise for a in sized)

