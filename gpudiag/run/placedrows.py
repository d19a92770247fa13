"""A process's placement rows (parent side, no TensorFlow): from its placement window's
graphs, else from TensorFlow's placement log in the saved stderr (placement_rows; why the
log cannot be used: log_reason), and what they say (ops per device, node -> device).

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

from gpudiag.readers import placementlog
from gpudiag.readers.placementlog import PLUMBING_OPS, PlacementRow, short_device
from gpudiag.records.run import FunctionGraph, ProcessObservation
from gpudiag.run.options import RunOptions


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


def log_reason(obs: ProcessObservation, options: RunOptions) -> str | None:
    """Why TensorFlow's placement log of this process cannot be used (None: it can)."""
    if options.in_kernel:
        return ("gpudiag.watch() ran inside the notebook's kernel: TensorFlow's C++ log (the "
                "placement log, CUDA and NCCL messages) went to the kernel's own stderr, "
                "which gpudiag does not read")
    if obs.cpp_log_level_overridden:
        return ("when the program imported TensorFlow its stderr (fd 2) was not the stream "
                "gpudiag reads (a file of its own), so TensorFlow's C++ log (the placement "
                "log, CUDA and NCCL messages) did not reach gpudiag")
    if not options.placement_log:
        return "placement logging was turned off (--no-placement-log)"
    if not obs.placement_log:
        return "gpudiag could not set up its placement window (see run.tensorflow)"
    return None


def placement_rows(stderr: str, obs: ProcessObservation, processes: int
                   ) -> tuple[list[PlacementRow], str | None]:
    """This process's placement rows: its placement window's graphs (gpudiag.run.placedrows)
    or, without one, the placement log in stderr. Several TensorFlow processes share one
    stderr: each gets the lines its main thread wrote (placementlog.lines_of_thread)."""
    if obs.placed_graphs:
        return rows_of(obs.placed_graphs, obs.graphs), None
    if processes == 1:
        return placementlog.parse(stderr), None
    rows = placementlog.parse(placementlog.lines_of_thread(stderr, obs.pid))
    if rows:
        return rows, None
    return [], (f"{processes} TensorFlow processes share one stderr and no placement line "
                f"came from process {obs.pid}'s main thread")


def placement_data(rows: list[PlacementRow]) -> tuple[dict[str, int], int, int,
                                                       dict[str, dict[str, str]]]:
    """Ops per device, eager op count, graph node count, function -> node -> device."""
    work = [r for r in rows if placementlog.is_work(r)]
    graphs: dict[str, dict[str, str]] = {}
    for r in rows:
        if r.kind == "graph" and r.function:
            graphs.setdefault(r.function, {})[r.op] = r.device
    return (placementlog.op_counts_by_device(rows), sum(r.kind == "eager" for r in work),
            sum(r.kind == "graph" for r in work), graphs)


def op_devices(rows: list[PlacementRow], obs: ProcessObservation) -> dict[str, str]:
    """Node name -> device for the trace: Session step stats, graph nodes of the placement
    log, and eager op types that always ran on one device."""
    out = {n: d for s in obs.step_stats for n, d in s.node_devices.items()}
    out.update({r.op: r.device for r in rows if r.kind == "graph"})
    eager: dict[str, set[str]] = {}
    for r in rows:
        if r.kind == "eager" and placementlog.is_work(r):
            eager.setdefault(r.op, set()).add(r.device)
    out.update({op: next(iter(d)) for op, d in eager.items() if len(d) == 1 and op not in out})
    return out
