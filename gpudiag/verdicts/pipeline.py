"""What the program's own tf.data calls show, as fixes at its lines: a map or interleave
without num_parallel_calls, a pipeline without prefetch, an in-memory data set mapped
again every epoch without cache, Python generators and py_functions. Pure: the calls the
hooks recorded (gpudiag.records.run.DatasetCall) in; never "add X" where X is there.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.records.run import DatasetCall

MAX_CHAIN = 200  # calls followed back from a pipeline's end


def _line(c: DatasetCall) -> str:
    code = (c.caller or {}).get("code") or ""
    return f"{c.where}" + (f" (`{code[:70]}`)" if code else "")


def pipeline_fixes(calls: Sequence[DatasetCall], epochs: int | None = None) -> list[str]:
    """What the program's own tf.data calls show: a map or interleave without
    num_parallel_calls, a pipeline without prefetch, an in-memory data set mapped again
    every epoch without cache (``epochs`` > 1), Python generators and py_functions."""
    mine = [c for c in calls if c.caller and c.caller.get("direct")]
    fixes = []
    for c in mine:
        fn = (c.function or {}).get("name")
        if c.method in ("map", "interleave") and c.args.get("num_parallel_calls") is None:
            fixes.append(f"Dataset.{c.method}({fn or ''}) at {_line(c)} runs one element at a "
                         "time: pass num_parallel_calls=tf.data.AUTOTUNE")
        elif c.method == "from_generator":
            fixes.append(f"Dataset.from_generator({fn or ''}) at {_line(c)} runs Python, one "
                         "element at a time under the GIL: read the data with tf.data ops "
                         "(from_tensor_slices, TFRecordDataset) where you can")
        elif c.method in ("py_function", "numpy_function"):
            fixes.append(f"tf.{c.method}({fn or ''}) at {_line(c)} runs Python under the GIL "
                         "for every element: write it with TensorFlow ops")
    by_output = {c.output: c for c in mine if c.output}
    fed = {c.input for c in mine if c.input}
    for leaf in [c for c in mine if c.output and c.output not in fed and c.input]:
        chain: list[DatasetCall] = []
        node: DatasetCall | None = leaf
        while node is not None and len(chain) < MAX_CHAIN:
            chain.append(node)
            node = by_output.get(node.input) if node.input else None
        methods = [n.method for n in chain]
        if len(chain) > 1 and "prefetch" not in methods:
            fixes.append(f"the pipeline ending at {_line(leaf)} has no prefetch: end it with "
                         ".prefetch(tf.data.AUTOTUNE) so the next batch is made while this "
                         "one trains")
        if epochs and epochs > 1 and "map" in methods and "cache" not in methods and \
                chain[-1].method in ("from_tensor_slices", "from_tensors"):
            mapped = next(n for n in chain if n.method == "map")
            fixes.append(f"the in-memory data set is mapped again in each of the {epochs} "
                         f"epochs: .cache() after the map at {mapped.where} maps it once")
    return fixes
