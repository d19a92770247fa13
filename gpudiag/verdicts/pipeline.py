"""What the program's own tf.data calls show, as fixes at its lines: a map or interleave
without num_parallel_calls, a pipeline without prefetch, an in-memory data set mapped
again every epoch without cache (never after a map that draws random numbers: the cache
would freeze its augmentation), Python generators and py_functions (a map running Python
is serialised by the GIL: vectorising it is the fix; num_parallel_calls overlaps only the
time its Python waits, advised beside it for `gpudiag try` to measure). Pure:
the calls the hooks recorded (gpudiag.layout.events.DatasetCall) in; never "add X" where X is there.
Without them (a trace alone: `explain`), what the trace's tf.data iterators show: the
stage the step waited in (xprof's input-pipeline analysis, gpudiag.readers.xprofview).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from gpudiag.layout.events import DatasetCall
from gpudiag.readers.xprofview import InputOp

MAX_CHAIN = 200  # calls followed back from a pipeline's end
# tf.data's own iterators around the program's pipeline (Dataset options, the model's
# autotuning root): not stages the program wrote
WRAPPER_STAGES = ("Model", "Root", "MaxIntraOpParallelism", "PrivateThreadPool")
SERIAL_STAGES = ("Map", "Interleave")  # the parallel ones: ParallelMapV2, MapAndBatch, ...


def _line(c: DatasetCall) -> str:
    code = (c.caller or {}).get("code") or ""
    return f"{c.where}" + (f" (`{code[:70]}`)" if code else "")


#: The fixes gpudiag.verdicts.whatif's input-bound model sizes (its prediction is theirs).
MODELLED = ("parallel", "generator", "prefetch", "cache")


@dataclass(frozen=True)
class Fix:
    """One fix at the program's tf.data line: the sentence the advice gives (``text``),
    the change in words (``what``), the user's ``file:line`` (``where``) and which it is
    (``kind``: parallel, python, generator, prefetch, cache, no-cache)."""

    text: str
    what: str
    where: str | None
    kind: str = ""


def fixes(calls: Sequence[DatasetCall], epochs: int | None = None) -> list[Fix]:
    """What the program's own tf.data calls show: a map or interleave without
    num_parallel_calls, a pipeline without prefetch, an in-memory data set mapped again
    every epoch without cache (``epochs`` > 1), Python generators and py_functions."""
    mine = [c for c in calls if c.caller and c.caller.get("direct")]
    out = []
    python_maps = [c for c in mine if c.method == "map" and python_ops(c)]
    for c in mine:
        fn = (c.function or {}).get("name")
        if c in python_maps:
            out += _python_map(c, fn)
        elif c.method in ("py_function", "numpy_function") and _inside(c, python_maps):
            continue  # said with its map
        elif c.method in ("map", "interleave") and c.args.get("num_parallel_calls") is None:
            out.append(Fix(f"Dataset.{c.method}({fn or ''}) at {_line(c)} runs one element at "
                           "a time: pass num_parallel_calls=tf.data.AUTOTUNE",
                           f"pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.{c.method}",
                           _where(c), "parallel"))
        elif c.method == "from_generator":
            out.append(Fix(f"Dataset.from_generator({fn or ''}) at {_line(c)} runs Python, one "
                           "element at a time under the GIL: read the data with tf.data ops "
                           "(from_tensor_slices, TFRecordDataset) where you can",
                           "read the data with tf.data ops (from_tensor_slices, "
                           "TFRecordDataset), not Dataset.from_generator", _where(c),
                           "generator"))
        elif c.method in ("py_function", "numpy_function"):
            out.append(Fix(f"tf.{c.method}({fn or ''}) at {_line(c)} runs Python under the GIL "
                           "for every element: write it with TensorFlow ops",
                           f"write tf.{c.method}'s function with TensorFlow ops", _where(c),
                           "python"))
    by_output = {c.output: c for c in mine if c.output}
    fed = {c.input for c in mine if c.input}
    # A prefetch made on a dataset no recorded call made (a transformation the hooks do not
    # wrap stood between): any pipeline may end in it, so none is said to lack one.
    unplaced_prefetch = any(c.method == "prefetch" and c.input not in by_output for c in mine)
    for leaf in [c for c in mine if c.output and c.output not in fed and c.input]:
        chain: list[DatasetCall] = []
        node: DatasetCall | None = leaf
        while node is not None and len(chain) < MAX_CHAIN:
            chain.append(node)
            node = by_output.get(node.input) if node.input else None
        methods = [n.method for n in chain]
        if len(chain) > 1 and "prefetch" not in methods and not unplaced_prefetch:
            out.append(Fix(f"the pipeline ending at {_line(leaf)} has no prefetch: end it with "
                           ".prefetch(tf.data.AUTOTUNE) so the next batch is made while this "
                           "one trains", "end the pipeline with .prefetch(tf.data.AUTOTUNE)",
                           _where(leaf), "prefetch"))
        if epochs and epochs > 1 and "map" in methods and "cache" not in methods and \
                chain[-1].method in ("from_tensor_slices", "from_tensors"):
            mapped = next(n for n in chain if n.method == "map")
            frozen = cache_freezes(chain, mapped)
            if frozen:
                out.append(Fix(f"no .cache() after the map at {_line(mapped)}: {frozen}, and a "
                               "cache would give every epoch the first epoch's elements (the "
                               "augmentation or the order would freeze); "
                               "where it also does deterministic work (decoding, resizing), "
                               "move that into a map of its own before it and .cache() after "
                               "that one", "keep the random map after any .cache(): split "
                               "its deterministic work into a map of its own and cache that",
                               _where(mapped), "no-cache"))
            else:
                out.append(Fix(f"the in-memory data set is mapped again in each of the "
                               f"{epochs} epochs: .cache() after the map at {mapped.where} "
                               "maps it once", "call .cache() after the map", _where(mapped),
                               "cache"))
    return out


def _python_map(c: DatasetCall, fn: str | None) -> list[Fix]:
    """A map whose function runs Python: vectorise it (the GIL runs its Python one element
    at a time); made one at a time, also num_parallel_calls, which overlaps what the Python
    waits for (a read's latency): for `gpudiag try` to measure, never alone."""
    serial = c.args.get("num_parallel_calls") is None
    out = [Fix(f"Dataset.map({fn or ''}) at {_line(c)} runs Python for every "
               f"element ({', '.join(python_ops(c))}: tf.py_function or "
               "tf.numpy_function): Python's GIL runs it one element at a time, "
               "so num_parallel_calls" + (" alone" if serial else " (already set)")
               + " overlaps only the TensorFlow ops around it and the time its "
               "Python waits (a file read, a network call: the GIL is let go "
               "while it waits); vectorise it: batch before the map and write the function "
               "with TensorFlow ops over the whole batch",
               "vectorise the map: batch before it and write its function with "
               "TensorFlow ops, not tf.py_function", _where(c), "python")]
    if serial:
        out.append(Fix(f"where the Python of Dataset.map({fn or ''}) at {_line(c)} waits "
                       "rather than computes, num_parallel_calls=tf.data.AUTOTUNE overlaps "
                       "its waits", "pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map",
                       _where(c), "parallel"))
    return out


def cache_freezes(chain: Sequence[DatasetCall], mapped: DatasetCall) -> str | None:
    """Why a .cache() after ``mapped`` would freeze what each epoch sees (None: it would
    not): its function draws random numbers, or runs Python that gpudiag cannot see into
    (it may draw them), or a shuffle comes before it (``chain``: from the pipeline's end
    back to its source)."""
    drawn = random_ops(mapped)
    if drawn:
        return f"it draws random numbers ({', '.join(drawn)})"
    python = python_ops(mapped)
    if python:
        return (f"it runs Python ({', '.join(python)}: tf.py_function or tf.numpy_function) "
                "that gpudiag cannot see into, which may draw random numbers")
    after = list(chain[chain.index(mapped) + 1:]) if mapped in chain else []
    shuffle = next((c for c in after if c.method == "shuffle"), None)
    if shuffle is not None:
        return f"it follows the shuffle at {shuffle.where}"
    return None


def random_ops(c: DatasetCall) -> list[str]:
    """The random number ops a map's traced function runs (gpudiag.inprogram.datasets)."""
    return list((c.function or {}).get("random_ops") or [])


def python_ops(c: DatasetCall) -> list[str]:
    """The Python ops (tf.py_function, tf.numpy_function) a map's traced function runs."""
    return list((c.function or {}).get("python_ops") or [])


def _inside(call: DatasetCall, maps: Sequence[DatasetCall]) -> bool:
    """A tf.py_function call made inside the function of one of ``maps``."""
    at = call.caller or {}
    return any((m.function or {}).get("file") == at.get("file")
               and str((m.function or {}).get("name", "")).rsplit(".", 1)[-1]
               == at.get("function") for m in maps)


def pipeline_fixes(calls: Sequence[DatasetCall], epochs: int | None = None) -> list[str]:
    """The advice's sentences of :func:`fixes`."""
    return [f.text for f in fixes(calls, epochs)]


def _where(c: DatasetCall) -> str | None:
    return c.where if c.caller else None


def parallel_and_prefetched(calls: Sequence[DatasetCall]) -> bool:
    """The program's own pipeline maps (and interleaves) in parallel and prefetches: the
    fixes tf.data's guide names first are in place."""
    mine = [c for c in calls if c.caller and c.caller.get("direct")]
    maps = [c for c in mine if c.method in ("map", "interleave")]
    return bool(maps) and all(c.args.get("num_parallel_calls") is not None for c in maps) \
        and any(c.method == "prefetch" for c in mine)


def _stages(name: str) -> list[str]:
    """An iterator's stages from the outermost transformation in, less tf.data's own
    wrappers: Iterator::Model::MaxIntraOpParallelism::Map::Prefetch is a map applied after
    a prefetch, [Map, Prefetch]; FlatMap[0]::Generator, [FlatMap, Generator]."""
    parts = [re.sub(r"\[\d+\]$", "", p) for p in name.split("::")[1:]]
    return [p for p in parts if p not in WRAPPER_STAGES]


def stage_fixes(ops: Sequence[InputOp]) -> list[str]:
    """What the trace's tf.data iterators show when the program's own calls are not known:
    the stage with the most time of its own (``ops``: xprof's, that first), which is where
    the step waited. Nothing is said of stages the analysis did not list."""
    stages = _stages(ops[0].name) if ops else []
    last = stages[-1] if stages else ""
    if last == "Prefetch":
        return ["the prefetch's buffer was empty when the step asked for its batch: the "
                "stages that fill it, on tf.data's own threads, did not keep up; make them "
                "faster: map and interleave with num_parallel_calls=tf.data.AUTOTUNE, "
                "cache() after the costly work when the data fits in memory, read and "
                "decode with tf.data ops, not in Python (a generator, or a Keras "
                "ImageDataGenerator or Sequence passed to fit(), makes one batch at a time "
                "under the GIL unless run with workers), or preprocess offline"]
    if last == "Generator":
        return ["the step waited on Python: Dataset.from_generator (and a generator or "
                "keras Sequence that fit() wraps in one) makes one element at a time "
                "under the GIL: read and decode with tf.data ops (from_tensor_slices, "
                "TFRecordDataset, map with num_parallel_calls=tf.data.AUTOTUNE)"]
    if last in SERIAL_STAGES:
        return [f"the step waited on a {last.lower()} that runs one element at a time: "
                f"pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.{last.lower()}"]
    return []
