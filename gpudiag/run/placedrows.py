"""The placement window's graphs as placement rows (parent side, no TensorFlow).

gpudiag.inprogram.placementwindow records, per function TensorFlow instantiated during a window,
its partitioned graphs' nodes with their assigned devices. Here they become the same
:class:`gpudiag.readers.placementlog.PlacementRow` rows the placement log gave: an eager op's
one-op function is one ``eager`` row (its op, its device), every other function's nodes
are ``graph`` rows. TensorFlow's run metadata does not name the function, so a placed
graph is matched to the program's recorded concrete function (gpudiag.inprogram.functions:
its name and the nodes it pinned) that shares the most node names with it; unmatched
graphs keep no function name (they still count per device).
"""

from __future__ import annotations

from typing import Any

from gpudiag.readers.placementlog import PLUMBING_OPS, PlacementRow, short_device
from gpudiag.records.run import FunctionGraph


def _best_function(names: set[str], graphs: list[FunctionGraph]) -> str | None:
    best, best_shared = None, 0
    for g in graphs:
        shared = sum(1 for node, _type, _dev in g.pinned if node in names)
        if shared > best_shared:
            best, best_shared = g.name, shared
    return best


def rows_of(placed: list[dict[str, Any]], graphs: list[FunctionGraph]) -> list[PlacementRow]:
    rows: list[PlacementRow] = []
    for graph in placed:
        nodes = [(str(n), str(t), short_device(str(d))) for n, t, d in graph.get("nodes") or []]
        if graph.get("eager"):
            rows += [PlacementRow("eager", t, t, d) for _n, t, d in nodes
                     if t not in PLUMBING_OPS]
            continue
        function = _best_function({n for n, _t, _d in nodes}, graphs)
        rows += [PlacementRow("graph", n, t, d, function) for n, t, d in nodes]
    return rows
