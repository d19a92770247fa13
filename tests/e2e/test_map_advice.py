"""Advice that fits the map (issue 35, item 7): no .cache() after a map that draws random
numbers (the augmentation would freeze); a map running Python through tf.py_function /
tf.numpy_function is told the GIL serialises it and that vectorising is the fix. Plain
data as the hooks record a map's traced ops, and real programs under `gpudiag run`
(tests/programs/augment_map_fit.py)."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from helpers import TESTS_DIR, ProgramRun, breakdown, run_program

from gpudiag.inprogram.datasets import is_random_op
from gpudiag.layout.events import DatasetCall
from gpudiag.verdicts import bottleneck as bn
from gpudiag.verdicts import pipeline

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


def pipeline_of(**function: Any) -> list[DatasetCall]:
    return [call("from_tensor_slices", 10, 1),
            call("map", 11, 2, 1, function, num_parallel_calls=None),
            call("batch", 12, 3, 2, batch_size=32)]


@pytest.mark.parametrize("op", ["RandomUniform", "RandomStandardNormal",
                                "StatelessRandomUniformV2", "StatelessRandomGetKeyCounter",
                                "RngReadAndSkip", "StatefulUniform", "TruncatedNormal",
                                "RandomShuffle", "Multinomial"])
def test_random_number_ops_are_known(op: str) -> None:
    assert is_random_op(op)


@pytest.mark.parametrize("op", ["MatMul", "Tanh", "Identity", "EagerPyFunc", "StatelessIf",
                                "StatefulPartitionedCall", "PartitionedCall"])
def test_other_ops_are_not_random(op: str) -> None:
    assert not is_random_op(op)


def test_a_random_map_is_never_told_to_cache_and_whatif_does_not_count_a_cache() -> None:
    calls = pipeline_of(random_ops=["StatelessRandomUniformV2"])
    fixes = pipeline.fixes(calls, epochs=3)
    assert [f.kind for f in fixes] == ["parallel", "prefetch", "no-cache"]
    text = fixes[-1].text
    assert text.startswith("no .cache() after the map at train.py:11")
    assert "draws random numbers (StatelessRandomUniformV2)" in text and "freeze" in text
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                      bn.ProgramFacts(calls=calls, loop="Model.fit", epochs=3))
    assert "maps it once" not in f.advice and "call .cache() after the map" not in \
        [a.what for a in f.actions]
    assert "cache" not in f.evidence["predicted"]["fix"]
    assert f.actions[0].predicted is not None  # the parallel map's, which is modelled
    # the same map without random ops: the cache is advised and predicted
    plain = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                          bn.ProgramFacts(calls=pipeline_of(), loop="Model.fit", epochs=3))
    assert "maps it once" in plain.advice and "cache" in plain.evidence["predicted"]["fix"]


@pytest.mark.parametrize(("calls", "why"), [
    # a random augmentation inside a py_function: gpudiag cannot see its random numbers
    (pipeline_of(python_ops=["EagerPyFunc"]), "runs Python (EagerPyFunc"),
    # a numpy_function after a shuffle
    ([call("from_tensor_slices", 10, 1), call("shuffle", 10, 2, 1, buffer_size=100),
      call("map", 11, 3, 2, {"python_ops": ["PyFunc"]}, num_parallel_calls=None),
      call("batch", 12, 4, 3, batch_size=32)], "runs Python (PyFunc"),
    # a map of TensorFlow ops after a shuffle: the cache would keep the first epoch's order
    ([call("from_tensor_slices", 10, 1), call("shuffle", 10, 2, 1, buffer_size=100),
      call("map", 11, 3, 2, num_parallel_calls=None), call("batch", 12, 4, 3, batch_size=32)],
     "it follows the shuffle at train.py:10"),
])
def test_no_cache_is_advised_after_a_python_map_or_a_shuffle(calls: list[DatasetCall],
                                                             why: str) -> None:
    fixes = pipeline.fixes(calls, epochs=3)
    kinds = [f.kind for f in fixes]
    assert "cache" not in kinds and "no-cache" in kinds
    no_cache = next(f for f in fixes if f.kind == "no-cache")
    assert no_cache.text.startswith("no .cache() after the map at train.py:11")
    assert why in no_cache.text and "freeze" in no_cache.text
    f = bn.bottleneck(breakdown(("/device:CPU:0", 10, 3, 0, 5, 2, 0, 0)), None,
                      bn.ProgramFacts(calls=calls, loop="Model.fit", epochs=3))
    assert not any("cache() after the map" in a.what for a in f.actions)
    assert "maps it once" not in f.advice
    assert "cache" not in (f.evidence["predicted"] or {}).get("fix", "")


def test_a_python_map_is_told_the_gil_and_to_vectorise_even_with_parallel_calls() -> None:
    calls = [call("from_tensor_slices", 10, 1),
             call("map", 11, 2, 1, {"python_ops": ["EagerPyFunc"]},
                  num_parallel_calls="AUTOTUNE"),
             call("batch", 12, 3, 2, batch_size=32), call("prefetch", 12, 4, 3),
             DatasetCall("py_function", {}, {"name": "slow", "file": "/u/train.py",
                                             "line": 5, "user": True}, None, None,
                         {"file": "/u/train.py", "line": 4, "function": "augment",
                          "code": "tf.py_function(slow, [x], tf.float32)", "direct": True})]
    (fix,) = pipeline.fixes(calls)  # the py_function inside the map: said with its map
    assert fix.kind == "python" and fix.where == "train.py:11"
    assert "Python's GIL runs it one element at a time" in fix.text
    assert "num_parallel_calls (already set) overlaps only the TensorFlow ops" in fix.text
    assert "vectorise it: batch before the map" in fix.text
    serial = pipeline.fixes([calls[0], call("map", 11, 2, 1, {"python_ops": ["PyFunc"]},
                                            num_parallel_calls=None)])
    assert "num_parallel_calls alone" in serial[0].text and serial[0].kind == "python"
    # vectorising first; beside it the parallel map, which overlaps what the Python waits
    # for (a file read): advised where `gpudiag try` can measure it, never alone
    assert serial[1].kind == "parallel" and serial[1].where == "train.py:11"
    assert serial[1].what == "pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map"
    assert "waits rather than computes" in serial[1].text
    assert [f.kind for f in serial] == ["python", "parallel", "prefetch"]
