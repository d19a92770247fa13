"""The program's events into one typed state per process (parent side, no TensorFlow):
each event goes to its kind's handler (:data:`HANDLERS`) into a
gpudiag.run.runstate.ProcessState; an event whose handler fails costs that event
(:func:`apply` says why). The events files are read by gpudiag.run.eventfiles.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import fields, replace
from typing import Any, TypeVar

from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.readers.placementlog import short_device
from gpudiag.records import run as rec
from gpudiag.run import classcount, runstate
from gpudiag.run.runstate import ProcessState, series_label

__all__ = ["HANDLERS", "apply", "series_label"]

E = TypeVar("E", bound=ev.Event)
Handler = Callable[[ProcessState, Any, "float | None"], None]
HANDLERS: dict[type[ev.Event], Handler] = {}


def on(kind: type[E]) -> Callable[[Callable[[ProcessState, E, float | None], None]],
                                  Handler]:
    def register(fn: Callable[[ProcessState, E, float | None], None]) -> Handler:
        HANDLERS[kind] = fn
        return fn
    return register


def apply(state: ProcessState, recorded: ev.Recorded) -> str | None:
    """One event into its process's state (its kind's handler); why it could not be,
    when its handler failed on a value decode let through (None: applied). Never raises:
    one event costs at most itself."""
    try:
        _apply(state, recorded)
    except Exception as exc:
        return f"{recorded.event.KIND or 'event'}: {type(exc).__name__}: {str(exc)[:100]}"
    return None


def _apply(state: ProcessState, recorded: ev.Recorded) -> None:
    state.events += 1
    t = recorded.t_unix_s
    if t is not None:
        state.first_t_unix_s = min(state.first_t_unix_s or t, t)
        state.last_t_unix_s = max(state.last_t_unix_s or t, t)
    handler = HANDLERS.get(type(recorded.event))
    if handler is not None:
        handler(state, recorded.event, t)


# The kinds kept as they are, and where each lands: the latest event of its kind stands
# (LATEST; NEWS: and it is news for the live view), the first stands (FIRST: the devices as
# the program set them up, its first crash), or each one is kept in order (EACH). The
# state's attributes below are what gpudiag.run.observation makes the record's fields of;
# the final record's own fields that keep a kind as the agent wrote it declare it there
# (gpudiag.records.run.kept), and land in ProcessState.kept, which the verdicts read.
LATEST: dict[type[ev.Event], str] = {
    ev.TfImport: "tf_import", ev.KerasImport: "keras", lev.InputFloor: "input_floor",
    lev.CpuUse: "cpu_use", lev.KerasCalls: "keras_calls",  # keras_calls: cumulative
    lev.HostReads: "host_reads"}  # cumulative too
NEWS: dict[type[ev.Event], str] = {ev.Process: "process", ev.Exit: "exit"}
FIRST: dict[type[ev.Event], str] = {ev.Devices: "devices"}
EACH: dict[type[ev.Event], str] = {
    lev.Compile: "compiles", lev.PyDataInput: "py_inputs", lev.Session: "sessions",
    ev.Unknown: "unknown"}
_STATE = {f.name for f in fields(ProcessState)}


def _declared() -> None:
    """The observation's fields that keep a kind (gpudiag.records.run.kept), each into its
    rule's table under its own name."""
    tables = {rec.EACH: EACH, rec.FIRST: FIRST, rec.LATEST: LATEST}
    for f in fields(rec.ProcessObservation):
        if "kept" in f.metadata:
            kind, rule = f.metadata["kept"]
            tables[rule][kind] = f.name


_declared()


def _slot(s: ProcessState, attr: str) -> dict[str, Any]:
    """Where ``attr`` is held: the state's own attributes, or the records kept for the
    observation."""
    return vars(s) if attr in _STATE else s.kept


def _latest(attr: str) -> Handler:
    return lambda s, e, t: _slot(s, attr).__setitem__(attr, e)


def _first(attr: str) -> Handler:
    def handler(s: ProcessState, e: ev.Event, t: float | None) -> None:
        if _slot(s, attr).get(attr) is None:
            _slot(s, attr)[attr] = e
    return handler


def _each(attr: str) -> Handler:
    return lambda s, e, t: _slot(s, attr).setdefault(attr, []).append(e)


def _news(attr: str) -> Handler:
    def handler(s: ProcessState, e: ev.Event, t: float | None) -> None:
        _slot(s, attr)[attr] = e
        s.news.append((t, e))
    return handler


HANDLERS.update({kind: _latest(attr) for kind, attr in LATEST.items()})
HANDLERS.update({kind: _news(attr) for kind, attr in NEWS.items()})
HANDLERS.update({kind: _first(attr) for kind, attr in FIRST.items()})
HANDLERS.update({kind: _each(attr) for kind, attr in EACH.items()})


# ------------------------------------------------------------------ what the process is
@on(ev.Strategy)
def _strategy(s: ProcessState, e: ev.Strategy, t: float | None) -> None:
    s.strategies.append(rec.StrategyRecord(
        e.class_name, e.num_replicas_in_sync, [short_device(d) for d in e.worker_devices],
        [short_device(d) for d in e.parameter_devices], e.cross_device_ops,
        e.communication_implementation, e.nccl, e.cluster, e.caller, e.module))


@on(ev.ClusterJoin)
def _cluster_join(s: ProcessState, e: ev.ClusterJoin, t: float | None) -> None:
    s.cluster_joins.append(rec.ClusterJoin(e.via, e.task_type, e.task_id, e.cluster_spec,
                                           caller=e.caller))
    s.news.append((t, e))


@on(ev.ClusterJoinEnded)
def _cluster_join_ended(s: ProcessState, e: ev.ClusterJoinEnded, t: float | None) -> None:
    for n in range(len(s.cluster_joins) - 1, -1, -1):  # the latest join by that way
        if s.cluster_joins[n].via == e.via or e.via == "?":
            s.cluster_joins[n] = replace(s.cluster_joins[n], outcome=e.outcome)
            return


@on(ev.PlacementLogAsked)
def _placement_log_asked(s: ProcessState, e: ev.PlacementLogAsked, t: float | None) -> None:
    s.placement_log_asked = e.reason


# ------------------------------------------------------------------------ the loops
@on(lev.FitBegin)
def _fit_begin(s: ProcessState, e: lev.FitBegin, t: float | None) -> None:
    s.fits.append(runstate.FitRun(e))
    loop = s.loop("fit", "", series_label("fit", None))
    loop.batch_size = e.batch_size
    loop.classes = classcount.fit_classes(e.output_width, e.loss)
    loop.first_loss = None  # a new fit: its own losses and batches
    loop.recent_losses.clear()
    loop.fit_batches.clear()


@on(lev.FitSteps)
def _fit_steps(s: ProcessState, e: lev.FitSteps, t: float | None) -> None:
    if s.fits:
        s.fits[-1].rows += e.rows
    loop = s.loop("fit", "", series_label("fit", None))
    s.stepped(loop, runstate.fit_steps(e.rows, loop.fit_batches))


@on(lev.FitEpoch)
def _fit_epoch(s: ProcessState, e: lev.FitEpoch, t: float | None) -> None:
    if s.fits:
        s.fits[-1].epochs.append(e.logs)


@on(lev.FitEnd)
def _fit_end(s: ProcessState, e: lev.FitEnd, t: float | None) -> None:
    if s.fits and e.iterations is not None:
        s.fits[-1].iterations = e.iterations


@on(lev.FunctionSteps)
def _function_steps(s: ProcessState, e: lev.FunctionSteps, t: float | None) -> None:
    s.function_rows.setdefault(e.function, []).extend(e.rows)
    loop = s.loop("function", e.function, series_label("function", e.function))
    s.stepped(loop, runstate.function_steps(e.rows))


@on(lev.Function)
def _function(s: ProcessState, e: lev.Function, t: float | None) -> None:
    if e.function in s.functions:
        return
    s.functions[e.function] = e
    for g in e.graphs:
        s.graphs.append(rec.FunctionGraph(e.function, str(g.get("name")), int(g.get("ops") or 0),
                                          [tuple(p) for p in g.get("pinned") or []]))
    loop = s.loop("function", e.function, series_label("function", e.function))
    loop.classes = classcount.function_classes(e)


@on(lev.Trace)
def _trace(s: ProcessState, e: lev.Trace, t: float | None) -> None:
    s.traces.setdefault(e.function, []).append(e)


@on(lev.EagerLoop)
def _eager_loop(s: ProcessState, e: lev.EagerLoop, t: float | None) -> None:
    s.eager.setdefault(e.step, e)
    s.loop("eager", e.step, series_label("eager", e.step))


@on(lev.EagerSteps)
def _eager_steps(s: ProcessState, e: lev.EagerSteps, t: float | None) -> None:
    s.eager_rows.setdefault(e.step, []).extend(e.rows)
    s.stepped(s.loop("eager", e.step, series_label("eager", e.step)), runstate.eager_steps(e.rows))


@on(lev.CallbackTimes)
def _callback_times(s: ProcessState, e: lev.CallbackTimes, t: float | None) -> None:
    if s.fits:  # cumulative over the fit: the latest stands
        s.fits[-1].callbacks = [{**c, "epoch": e.epoch} for c in e.callbacks]


@on(lev.SessionSteps)
def _session_steps(s: ProcessState, e: lev.SessionSteps, t: float | None) -> None:
    fetches, rows = s.groups.setdefault(e.group, (list(e.fetches), []))
    rows += e.rows
    loop = s.loop("session", str(e.group), series_label("session", e.group, fetches))
    s.stepped(loop, runstate.session_steps(e.rows))


@on(ev.Weights)
def _weights(s: ProcessState, e: ev.Weights, t: float | None) -> None:
    s.weights.setdefault(e.source, []).append(e)


@on(lev.Stall)
def _stall(s: ProcessState, e: lev.Stall, t: float | None) -> None:
    s.stalls.append({
        "t": t, "waited_s": e.waited_s, "timeout_s": e.timeout_s, "steps": e.steps,
        "loop": e.loop, "loop_kind": e.loop_kind, "median_period_s": e.median_period_s,
        "where": e.where, "threads": e.threads, "since": e.since, "ended_after_s": None})
    s.news.append((t, e))


@on(lev.StallEnd)
def _stall_end(s: ProcessState, e: lev.StallEnd, t: float | None) -> None:
    if s.stalls:
        s.stalls[-1]["ended_after_s"] = e.after_s
    s.news.append((t, e))


# ------------------------------------------------------------- placement and sessions
@on(ev.PlacementWindow)
def _placement_window(s: ProcessState, e: ev.PlacementWindow, t: float | None) -> None:
    s.placement_windows.append({"window": e.window, "opened_by": e.reason, "closed_by": None,
                                "graphs": 0, "nodes_left_out": 0})


@on(ev.Placement)
def _placement(s: ProcessState, e: ev.Placement, t: float | None) -> None:
    graphs = [g for g in e.graphs if isinstance(g, dict)]
    s.placed_graphs.extend(graphs)
    window = next((w for w in s.placement_windows if w["window"] == e.window), None)
    if window is None:
        window = {"window": e.window, "opened_by": None}
        s.placement_windows.append(window)
    window.update(closed_by=e.reason, graphs=len(graphs), nodes_left_out=e.nodes_left_out)


# ------------------------------------------------------------ what went wrong, the end
@on(ev.HookError)
def _hook_error(s: ProcessState, e: ev.HookError, t: float | None) -> None:
    s.hook_errors.append({"kind": e.KIND, "where": e.where, "type": e.type,
                          "message": e.message, "traceback": e.traceback})


@on(ev.HookNote)
def _hook_note(s: ProcessState, e: ev.HookNote, t: float | None) -> None:
    s.hook_errors.append({"kind": e.KIND, "where": e.where, "type": None, "message": e.message})

