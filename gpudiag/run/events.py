"""Read the program's events files into one typed state per process (parent side, no
TensorFlow).

One file per process (children/program/events-<pid>.jsonl), every line decoded by
gpudiag.layout.eventdecode (the only reader of the format). A file whose last line was cut
short (the process was killed while writing it) loses only that line; a line that is not
JSON, no event, or holds a field of another shape (gpudiag.layout.eventdecode.check), is
skipped, counted and named (:class:`Unreadable`), and so is an event whose handler fails:
one bad line costs that line, never the run's report. Each event goes to its kind's handler
(:data:`HANDLERS`) into a gpudiag.run.runstate.ProcessState: gpudiag.run.live applies each
poll's new lines (:class:`Follower`), the end applies the whole files
(:func:`observe_all`) and turns each state into a ProcessObservation.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from gpudiag.layout import RUN_EVENTS_PREFIX, RUN_EVENTS_SUFFIX, run_faults_name
from gpudiag.layout import eventdecode as evd
from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.readers.placementlog import short_device
from gpudiag.records import run as rec
from gpudiag.run import classcount, observation, runstate
from gpudiag.run.runstate import ProcessState, series_label

__all__ = ["HANDLERS", "Follower", "apply", "observe", "observe_all", "read_events",
           "series_label"]

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


# the kinds kept as they are: the latest event of its kind stands (LATEST; NEWS: and it is
# news for the live view), or each one is kept in order (EACH); the state's attribute that
# holds them
LATEST: dict[type[ev.Event], str] = {
    ev.TfImport: "tf_import", ev.KerasImport: "keras", lev.InputFloor: "input_floor",
    lev.CpuUse: "cpu_use", lev.KerasCalls: "keras_calls",  # keras_calls: cumulative
    lev.HostReads: "host_reads"}  # cumulative too
NEWS: dict[type[ev.Event], str] = {ev.Process: "process", ev.Exit: "exit"}
EACH: dict[type[ev.Event], str] = {
    lev.Compile: "compiles", lev.PyDataInput: "py_inputs", lev.Session: "sessions",
    ev.Unknown: "unknown"}


def _latest(attr: str) -> Handler:
    return lambda s, e, t: setattr(s, attr, e)


def _each(attr: str) -> Handler:
    return lambda s, e, t: getattr(s, attr).append(e)


def _news(attr: str) -> Handler:
    def handler(s: ProcessState, e: ev.Event, t: float | None) -> None:
        setattr(s, attr, e)
        s.news.append((t, e))
    return handler


HANDLERS.update({kind: _latest(attr) for kind, attr in LATEST.items()})
HANDLERS.update({kind: _news(attr) for kind, attr in NEWS.items()})
HANDLERS.update({kind: _each(attr) for kind, attr in EACH.items()})


# ------------------------------------------------------------------ what the process is
@on(ev.ConfigCall)
def _config_call(s: ProcessState, e: ev.ConfigCall, t: float | None) -> None:
    s.config_calls.append(rec.ConfigCall(e.order, e.api, e.args, e.kwargs, e.initialized_before,
                                         e.caller, e.error_type, e.error))


@on(ev.Devices)
def _devices(s: ProcessState, e: ev.Devices, t: float | None) -> None:
    if s.devices is None:  # the first look: what the program set up
        s.devices = e


@on(ev.Strategy)
def _strategy(s: ProcessState, e: ev.Strategy, t: float | None) -> None:
    s.strategies.append(rec.StrategyRecord(
        e.class_name, e.num_replicas_in_sync, [short_device(d) for d in e.worker_devices],
        [short_device(d) for d in e.parameter_devices], e.cross_device_ops,
        e.communication_implementation, e.nccl, e.cluster, e.caller, e.module))


@on(ev.ClusterJoin)
def _cluster_join(s: ProcessState, e: ev.ClusterJoin, t: float | None) -> None:
    s.joins.append(rec.ClusterJoin(e.via, e.task_type, e.task_id, e.cluster_spec,
                                   caller=e.caller))
    s.news.append((t, e))


def _join_outcome(s: ProcessState, via: str, outcome: str) -> None:
    for n in range(len(s.joins) - 1, -1, -1):  # the latest join by that way
        if s.joins[n].via == via or via == "?":
            s.joins[n] = replace(s.joins[n], outcome=outcome)
            return


@on(ev.ClusterJoined)
def _cluster_joined(s: ProcessState, e: ev.ClusterJoined, t: float | None) -> None:
    _join_outcome(s, e.via, "joined")


@on(ev.ClusterJoinFailed)
def _cluster_join_failed(s: ProcessState, e: ev.ClusterJoinFailed, t: float | None) -> None:
    _join_outcome(s, e.via, "failed")


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
    s.placed.extend(graphs)
    window = next((w for w in s.placement_windows if w["window"] == e.window), None)
    if window is None:
        window = {"window": e.window, "opened_by": None}
        s.placement_windows.append(window)
    window.update(closed_by=e.reason, graphs=len(graphs), nodes_left_out=e.nodes_left_out)


@on(lev.StepStats)
def _step_stats(s: ProcessState, e: lev.StepStats, t: float | None) -> None:
    s.step_stats.append(rec.StepStats(e.group, e.devices, e.pinned, e.node_devices, e.call))


@on(ev.DatasetCall)
def _dataset_call(s: ProcessState, e: ev.DatasetCall, t: float | None) -> None:
    s.datasets.append(rec.DatasetCall(e.method, e.args, e.function, e.input, e.output, e.caller,
                                      e.shape_lost))


@on(ev.DeviceScope)
def _device_scope(s: ProcessState, e: ev.DeviceScope, t: float | None) -> None:
    s.scopes.append(rec.DeviceScope(e.device, e.caller))


# ------------------------------------------------------------ what went wrong, the end
@on(ev.Crash)
def _crash(s: ProcessState, e: ev.Crash, t: float | None) -> None:
    if s.crash is None:
        s.crash = rec.CrashRecord(e.type, e.message, e.thread, e.frames, e.user_frame, e.causes,
                                  e.module)


@on(ev.Profile)
def _profile(s: ProcessState, e: ev.Profile, t: float | None) -> None:
    s.profile = rec.ProfileRecord(e.status, e.logdir, e.source, e.steps, e.error, e.first_step)


@on(ev.TfLog)
def _tf_log(s: ProcessState, e: ev.TfLog, t: float | None) -> None:
    s.tf_logs.append(rec.TfLogRecord(e.level, e.message, e.source, e.shown, e.logger))


@on(ev.PyWarning)
def _py_warning(s: ProcessState, e: ev.PyWarning, t: float | None) -> None:
    s.py_warnings.append(rec.PyWarning(e.category, e.message, e.file, e.line, e.user_frame))


@on(ev.HookError)
def _hook_error(s: ProcessState, e: ev.HookError, t: float | None) -> None:
    s.hook_errors.append({"kind": e.KIND, "where": e.where, "type": e.type,
                          "message": e.message, "traceback": e.traceback})


@on(ev.HookNote)
def _hook_note(s: ProcessState, e: ev.HookNote, t: float | None) -> None:
    s.hook_errors.append({"kind": e.KIND, "where": e.where, "type": None, "message": e.message})


@on(ev.Tf1Distribution)
def _tf1_distribution(s: ProcessState, e: ev.Tf1Distribution, t: float | None) -> None:
    s.tf1_calls.append(rec.Tf1Call(e.api, e.args, e.caller))


# -------------------------------------------------------------------------- reading
def _files(events_dir: Path) -> list[Path]:
    return sorted(events_dir.glob(f"{RUN_EVENTS_PREFIX}*{RUN_EVENTS_SUFFIX}"))


@dataclass
class Unreadable:
    """The events lines that could not be read: how many, and the first few, each as
    ``events-<pid>.jsonl line <n>: <why>``; ``cut``: files whose last line was cut short
    (its process killed while writing it: the one line such a kill costs, not counted)."""

    count: int = 0
    first: list[str] = field(default_factory=list)
    cut: int = 0
    newer: set[int] = field(default_factory=set)  # protocol versions above this gpudiag's

    def seen(self, recorded: ev.Recorded) -> None:
        if isinstance(recorded.event, ev.Unknown) and \
                recorded.event.version > ev.PROTOCOL_VERSION:
            self.newer.add(recorded.event.version)

    def add(self, where: str, reason: str) -> None:
        self.count += 1
        if len(self.first) < MAX_UNREADABLE_SAID:
            self.first.append(f"{where}: {reason}")


MAX_UNREADABLE_SAID = 5


def read_events(events_dir: Path) -> tuple[dict[int, list[ev.Recorded]], Unreadable]:
    """{pid: events in order}, and the lines that could not be read. A file's last line
    without its newline (its process was killed while writing it) is left out, counted
    apart (``Unreadable.cut``)."""
    out: dict[int, list[ev.Recorded]] = {}
    bad = Unreadable()
    for path in _files(events_dir):
        try:
            data = path.read_bytes()
        except OSError as exc:
            bad.add(path.name, f"not readable ({exc.strerror})")
            continue
        *lines, last = data.split(b"\n")  # the last: empty, or a line cut short
        bad.cut += bool(last.strip())
        for n, line in enumerate(lines, 1):
            found = evd.check_line(line)
            if isinstance(found, evd.BadLine):
                bad.add(f"{path.name} line {n}", found.reason)
                continue
            bad.seen(found)
            out.setdefault(found.pid, []).append(found)
    for records in out.values():
        records.sort(key=lambda r: r.seq)
    return out, bad


@dataclass
class _Offset:
    offset: int = 0
    pending: bytes = b""


@dataclass
class Follower:
    """The events files read as they grow (only whole new lines), into one state per
    process (gpudiag.run.live: once a poll)."""

    events_dir: Path
    states: dict[int, ProcessState] = field(default_factory=dict)
    bad_lines: Unreadable = field(default_factory=Unreadable)
    _files: dict[Path, _Offset] = field(default_factory=dict)

    def poll(self) -> dict[int, ProcessState]:
        """Every process's state, with this poll's new steps and news."""
        for state in self.states.values():
            state.begin_poll()
        for path in _files(self.events_dir):
            follow = self._files.setdefault(path, _Offset())
            with path.open("rb") as f:
                f.seek(follow.offset)
                data = f.read()
            follow.offset += len(data)
            *lines, follow.pending = (follow.pending + data).split(b"\n")
            for line in lines:
                found = evd.check_line(line)
                if isinstance(found, evd.BadLine):
                    self.bad_lines.add(path.name, found.reason)
                    continue
                self.bad_lines.seen(found)
                state = self.states.setdefault(found.pid, ProcessState(found.pid))
                failed = apply(state, found)
                if failed is not None:
                    self.bad_lines.add(path.name, failed)
        return self.states


def observe(pid: int, records: list[ev.Recorded], events_dir: Path,
            bad: Unreadable | None = None) -> rec.ProcessObservation:
    """One process's events as a ProcessObservation (an event its handler could not take
    goes to ``bad``)."""
    state = ProcessState(pid)
    for recorded in records:
        failed = apply(state, recorded)
        if failed is not None and bad is not None:
            bad.add(f"{RUN_EVENTS_PREFIX}{pid}{RUN_EVENTS_SUFFIX} seq {recorded.seq}", failed)
    faults = events_dir / run_faults_name(pid)
    return observation.of(state, faults.read_text(errors="replace")
                          if faults.is_file() else "")


def observe_all(events_dir: Path) -> tuple[list[rec.ProcessObservation], Unreadable]:
    """Every process, in the order they started; and the lines that could not be read."""
    by_pid, bad = read_events(events_dir)
    order = sorted(by_pid, key=lambda pid: by_pid[pid][0].t_unix_s or 0.0)
    return [observe(pid, by_pid[pid], events_dir, bad) for pid in order], bad
