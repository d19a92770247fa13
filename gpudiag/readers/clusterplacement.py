"""Where a cluster's work ran, read from TensorFlow's own placement log.

In a parameter-server job the coordinator's placement log names remote devices in full
(``Executing op ReadVariableOp in device /job:ps/replica:0/task:1/device:CPU:0``), and each
tf.distribute.Server's placer names the task whose graph it places
(``... (MatMul): /job:worker/replica:0/task:2/device:CPU:0``). Such a name says which task
the op ran on whatever process or thread wrote the line, so a log shared by several
processes (or one process hosting an in-process cluster) is attributed without thread ids.
``/job:localhost`` (a program with no cluster) names no task and is left out.
"""

from __future__ import annotations

import re
from collections import Counter

from gpudiag.devnames import short_device
from gpudiag.readers.placementlog import PLUMBING_OPS

_JOB_TASK = re.compile(r"/job:(?P<job>[A-Za-z_][\w-]*)/replica:\d+/task:(?P<task>\d+)"
                       r"(?P<device>/device:[A-Za-z_]+:\d+)")
_EAGER = re.compile(r"Executing op (?P<op>\S+) in device (?P<device>\S+)")
_GRAPH = re.compile(r"placer\.cc:\d+\]\s+.+?: \((?P<type>[^)]+)\): (?P<device>/\S+)\s*$")


def task_device(device: str) -> tuple[str, str] | None:
    """``/job:worker/replica:0/task:1/device:CPU:0`` -> ``("worker-1", "/device:CPU:0")``;
    None for ``/job:localhost`` and names without a job."""
    m = _JOB_TASK.search(device)
    if m is None or m["job"] == "localhost":
        return None
    return f"{m['job']}-{m['task']}", short_device(m["device"])


def ops_by_task(text: str) -> dict[str, dict[str, int]]:
    """{task: {device: ops}} of real work (function plumbing and the function calls
    themselves left out) placed on a cluster task, from a captured stderr."""
    counts: Counter[tuple[str, str]] = Counter()
    for line in text.splitlines():
        graph = _GRAPH.search(line)
        if graph:
            if graph["type"] in PLUMBING_OPS:
                continue
            where = task_device(graph["device"])
        else:
            eager = _EAGER.search(line)
            if eager is None or eager["op"].startswith("__") or "_inference_" in eager["op"]:
                continue
            where = task_device(eager["device"])
        if where is not None:
            counts[where] += 1
    out: dict[str, dict[str, int]] = {}
    for (task, device), n in sorted(counts.items()):
        out.setdefault(task, {})[device] = n
    return out


_VARIABLE_OPS = frozenset({"VarHandleOp", "VariableV2", "Variable"})
_GRAPH_NODE = re.compile(r"placer\.cc:\d+\]\s+(?P<node>.+?): \((?P<type>[^)]+)\): "
                         r"(?P<device>/\S+)\s*$")


def variables_by_task(text: str) -> dict[str, int]:
    """{task: variables created there}: each ``VarHandleOp`` a task executed eagerly (TF2
    creates every variable that way; the coordinator's ``Executing op VarHandleOp on task
    ...`` dispatch lines are not counted, the task's own are), and each distinct variable
    node a tf.compat.v1 graph placed on it (``w: (VariableV2): /job:ps/...``; a graph is
    placed again for each Session, its nodes counted once)."""
    counts: Counter[str] = Counter()
    nodes: set[tuple[str, str]] = set()
    for line in text.splitlines():
        graph = _GRAPH_NODE.search(line)
        if graph is not None:
            where = task_device(graph["device"])
            if graph["type"] in _VARIABLE_OPS and where is not None:
                nodes.add((where[0], graph["node"]))
            continue
        eager = _EAGER.search(line)
        if eager is not None and eager["op"] == "VarHandleOp":
            where = task_device(eager["device"])
            if where is not None:
                counts[where[0]] += 1
    for task, _node in nodes:
        counts[task] += 1
    return dict(sorted(counts.items()))


def sync_replicas(text: str) -> bool:
    """The log placed tf.train.SyncReplicasOptimizer's token queue (``sync_token_q``, the
    queue its chief fills once per aggregated update): synchronous between-graph training."""
    return any("sync_token_q" in line and "placer.cc" in line for line in text.splitlines())


def merge(parts: list[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """Sum per-task device counts of several runs' logs (each line is in one log only)."""
    out: dict[str, dict[str, int]] = {}
    for part in parts:
        for task, devices in part.items():
            mine = out.setdefault(task, {})
            for device, n in devices.items():
                mine[device] = mine.get(device, 0) + n
    return dict(sorted(out.items()))


def most(parts: list[dict[str, int]]) -> dict[str, int]:
    """Per task, the largest of several runs' counts."""
    out: dict[str, int] = {}
    for part in parts:
        for task, n in part.items():
            out[task] = max(out.get(task, 0), n)
    return dict(sorted(out.items()))


def listing(by_task: dict[str, dict[str, int]]) -> str:
    """``worker-0 412 ops (/device:CPU:0), ps-0 1060 ops (/device:CPU:0)``."""
    return ", ".join(f"{task} {sum(devices.values())} ops ({', '.join(devices)})"
                     for task, devices in by_task.items())
