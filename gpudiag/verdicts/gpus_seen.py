"""Which GPUs TensorFlow listed and, where it listed none, why: read from anywhere in a
report (a probe's devices, a process's evidence, a finding's), for the verdict's devices
entry (gpudiag.verdicts.headline) and the dashboard.

"No GPU" is decided from what TensorFlow listed (``physical_gpus``, a process's ``gpus``),
never from a missing line; its reason only from recorded evidence: CUDA_VISIBLE_DEVICES as
the process had it, TensorFlow's build (``is_built_with_cuda``), the NVML library and
TensorFlow's own "Could not find cuda drivers" line (gpudiag.catalogue). Without such
evidence the reason is not known.
"""

from __future__ import annotations

import contextlib
import itertools
import re
import threading
from collections.abc import Iterator
from typing import Any

#: Every key the verdict looks for anywhere in a report: indexed in one pass (_index).
_KEYS = frozenset({"physical_gpus", "is_built_with_cuda", "cuda_build", "nvml_unavailable_reason",
                   "reason", "catalogue_matches", "id", "nvml_gpus", "gpus", "ops_by_device",
                   "CUDA_VISIBLE_DEVICES", "cuda_visible_devices"})
_LEAVES = frozenset({str, int, float, bool, type(None)})
#: While indexed() holds: id(node) -> (node, its index), since the verdict asks about
#: the same nodes many times (the node is held, so that its id stays its own); None
#: outside it: each walk indexes afresh (a report may change between two calls).
_INDEXED = threading.local()  # .nodes: that dict, or absent


def _index(node: Any) -> dict[str, list[Any]]:
    """Every value stored under one of _KEYS anywhere in ``node`` (dicts and lists), by
    key, in order. One iterative pass, linear in the containers: a list of plain values
    is passed over at C speed (a report of 14 million numbers)."""
    out: dict[str, list[Any]] = {}
    stack: list[Iterator[tuple[Any, Any]]] = [iter([(None, node)])]
    while stack:
        for k, v in stack[-1]:
            if k in _KEYS:
                out.setdefault(k, []).append(v)
            if isinstance(v, dict) and v:
                stack.append(iter(v.items()))
                break
            if isinstance(v, list) and v and not (len(v) > 16 and
                                                  set(map(type, v)) <= _LEAVES):
                stack.append(zip(itertools.repeat(None), v))
                break
        else:
            stack.pop()
    return out


def walk(node: Any, key: str) -> Iterator[Any]:
    """Every value stored under ``key`` (one of _KEYS) anywhere in ``node``, in order."""
    nodes: dict[int, tuple[Any, dict[str, list[Any]]]] | None = getattr(_INDEXED, "nodes",
                                                                          None)
    if nodes is None:
        return iter(_index(node).get(key, ()))
    held = nodes.get(id(node))
    if held is None or held[0] is not node:
        held = nodes[id(node)] = (node, _index(node))
    return iter(held[1].get(key, ()))

@contextlib.contextmanager
def indexed() -> Iterator[None]:
    """While held, each report node is indexed once, however often it is asked about."""
    outer = getattr(_INDEXED, "nodes", None)
    _INDEXED.nodes = {} if outer is None else outer
    try:
        yield
    finally:
        _INDEXED.nodes = outer


def tf_gpus(report: dict[str, Any]) -> list[str] | None:
    """The GPUs TensorFlow listed, from any probe or process of the report (None: no
    record of what TensorFlow listed)."""
    lists = [v for v in walk(report.get("devices", {}), "physical_gpus") if isinstance(v, list)]
    for f in report.get("findings", []):
        lists += [v for v in walk(f.get("evidence", {}), "physical_gpus")
                  if isinstance(v, list)]
        devices = f.get("evidence", {}).get("devices")
        if isinstance(devices, dict) and isinstance(devices.get("gpus"), list):
            lists.append(devices["gpus"])
    lists += [v for v in walk(report.get("data", {}), "physical_gpus") if isinstance(v, list)]
    if not lists:
        return None
    seen: dict[str, None] = {}  # in order, each once (a dict: linear in the names)
    for gpus in lists:
        for g in gpus:
            name = g.get("name") if isinstance(g, dict) else str(g)
            if name:
                seen.setdefault(str(name))
    return list(seen)


def why_no_gpu(report: dict[str, Any]) -> str:
    """Why TensorFlow listed no GPU, from the recorded evidence only."""
    reasons: list[str] = []
    for key in ("CUDA_VISIBLE_DEVICES", "cuda_visible_devices"):
        for value in walk(report, key):
            if isinstance(value, str) and not re.search(r"\d|GPU-|MIG-", value.replace(
                    "-1", "")):
                reasons.append(f"CUDA_VISIBLE_DEVICES={value!r} hides every GPU")
                break
    builds = [v for k in ("is_built_with_cuda", "cuda_build") for v in walk(report, k)]
    if False in builds and True not in builds:
        reasons.append("TensorFlow is a CPU-only build")
    texts = [str(v) for k in ("nvml_unavailable_reason", "reason") for v in walk(report, k)]
    catalogue = [m for v in walk(report, "catalogue_matches") if isinstance(v, list) for m in v]
    catalogue += [v for v in walk(report, "id") if v == "cuda-drivers-missing"]
    nvml = max((len(v) for k in ("nvml_gpus", "gpus") for v in walk(report, k)
                if isinstance(v, list) and v and all(isinstance(g, dict) and "util_mean_percent"
                                                     in g for g in v)), default=0)
    if nvml:  # the driver answers NVML: TensorFlow's CUDA is what did not start
        reasons.append(f"NVML sees {nvml} GPU(s); TensorFlow's CUDA did not start")
    elif any("no NVIDIA driver" in t for t in texts) or "cuda-drivers-missing" in catalogue:
        reasons.append("no NVIDIA driver")
    if not reasons:
        return "why: see gpudiag env"  # fits the 80 columns after the CPU devices
    return "; ".join(dict.fromkeys(reasons))


def cpu_devices(report: dict[str, Any]) -> str:
    """Where the work ran instead: the virtual CPU devices, the devices ops ran on, or
    the logical devices TensorFlow listed."""
    devices = report.get("devices", {})
    if devices.get("kind") == "virtual-cpu":
        return f" ({len(devices.get('compute_devices', []))} virtual CPU devices)"
    used: list[str] = []
    for v in walk(report.get("findings", []), "ops_by_device"):
        if isinstance(v, dict):
            used += [d for d in v if d not in used]
    if not used:
        logical = devices.get("logical_devices") or []
        used = [str(d.get("name") if isinstance(d, dict) else d) for d in logical]
    return f" ({', '.join(used)})" if used else ""
