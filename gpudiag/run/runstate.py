"""One process's events gathered into one typed state (parent side, no TensorFlow).

Every event of gpudiag.layout.events goes through one table, kind -> handler
(gpudiag.run.events.HANDLERS), into a :class:`ProcessState`. The same state serves every view:
while the program runs, gpudiag.run.live applies each poll's new events and draws from
it the status line, the live TensorBoard files, the peers file and what is told on the
terminal (each loop under one key, :class:`Loop`); at the end gpudiag.run.events
gathers the whole files the same way and :meth:`ProcessState.observation` makes the
final analysis's ProcessObservation (gpudiag.records.run, gpudiag.run.events.observation).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.records.run import ClusterJoin, FunctionGraph, Step, StrategyRecord

LOSSES_KEPT = 50  # per loop, the recent finite losses (the live ln(classes) check)


def series_label(kind: str, name: object, fetches: Sequence[str] | None = None) -> str:
    """How a loop is named in the report and in its TensorBoard tags (tbwrite): a step
    function by its name, a Session.run group by its number and fetches (Keras fit is
    "Model.fit", numbered by ``observe`` when a process fits more than once)."""
    if kind == "function":
        return f"tf.function {name}"
    if kind == "session":
        return f"Session.run #{name} [{', '.join(fetches or [])[:80]}]"
    if kind == "eager":
        return f"eager step {name}"
    return "Model.fit"


def _per_call(r: lev.FitRow, last_batch: dict[int | None, int]) -> int:
    """Training steps one fit call ran: Keras calls ``on_train_batch_end`` with the last
    batch of a call of ``steps_per_execution`` steps, so a call ran the batches since the
    previous call's last of the same epoch (an epoch's first call: from batch 0); an
    aggregated row of ``n`` calls, their batches over ``n``."""
    if r.batch is None:
        return 1
    n = (r.batch - last_batch.get(r.epoch, -1)) // max(r.n, 1)
    last_batch[r.epoch] = r.batch
    return max(n, 1)


def fit_steps(rows: Sequence[lev.FitRow],
              last_batch: dict[int | None, int] | None = None) -> list[Step]:
    """Fit's rows as steps. ``last_batch`` (epoch -> the batch its previous call ended at)
    carries over between reads of the same fit's rows (the live thread reads them a few
    at a time); a fresh one reads all of them at once."""
    steps = []
    last_batch = {} if last_batch is None else last_batch
    for r in rows:
        logs = dict(r.logs)
        call = r.t_end - r.t0 if r.t0 is not None and r.t_end is not None else None
        loss = logs.pop("loss", None)
        steps.append(Step(r.i, r.t0, call, loss if isinstance(loss, int | float) else None,
                          logs, epoch=r.epoch, count=r.n, per_call=_per_call(r, last_batch)))
    return steps


def function_steps(rows: Sequence[lev.FunctionRow]) -> list[Step]:
    """A row may come again for a call (its loss, read at the program's end): merged."""
    merged: dict[int, lev.FunctionRow] = {}
    for r in rows:
        was = merged.get(r.i)
        merged[r.i] = r if was is None else replace(
            was, t0=r.t0 if r.t0 is not None else was.t0,
            dt=r.dt if r.dt is not None else was.dt,
            loss=r.loss if r.loss is not None else was.loss, n=max(r.n, was.n),
            tracing=r.tracing or was.tracing,
            wait_s=r.wait_s if r.wait_s is not None else was.wait_s)
    return [Step(r.i, r.t0, r.dt, r.loss, count=r.n, tracing=r.tracing, wait_s=r.wait_s)
            for _, r in sorted(merged.items())]


def eager_steps(rows: Sequence[lev.FunctionRow]) -> list[Step]:
    """An eager step's rows: its start (the gradient call), the input it waited for."""
    return [Step(r.i, r.t0, r.dt, r.loss, count=r.n, wait_s=r.wait_s) for r in rows]


def session_steps(rows: Sequence[lev.SessionRow]) -> list[Step]:
    return [Step(r.i, r.t0, r.dt, r.value, traced=r.traced, count=r.n) for r in rows]


def _merged(steps: list[Step]) -> list[Step]:
    """A step function's steps by index, a row come again adding its loss (its end)."""
    by_index: dict[int, Step] = {}
    for s in steps:
        was = by_index.get(s.index)
        by_index[s.index] = s if was is None else replace(
            was, loss=s.loss if s.loss is not None else was.loss)
    return [by_index[i] for i in sorted(by_index)]


@dataclass
class Loop:
    """One training loop of a process, under one key (``kind``, ``name``): Keras fit (every
    fit of the process, name ""), a step function (its name), a Session.run group (its
    number). What the views read of it, kept up to date by each poll."""

    kind: str  # fit | function | session
    name: str
    label: str
    classes: tuple[int | None, str] = (None, "")  # gpudiag.run.classcount
    batch_size: int | None = None
    new: list[Step] = field(default_factory=list)  # the steps read by this poll
    done: int = 0  # steps finished (the highest index + its count)
    last_start_unix_s: float | None = None
    last_end_unix_s: float | None = None
    loss: float | None = None  # the latest loss seen
    first_loss: float | None = None  # this fit's (or loop's) first finite loss
    recent_losses: deque[float] = field(default_factory=lambda: deque(maxlen=LOSSES_KEPT))
    rate: str | None = None  # examples/s or steps/s between the last two polls
    bad_loss: Step | None = None  # its first NaN or inf loss
    fit_batches: dict[int | None, int] = field(default_factory=dict)  # fit_steps' carry

    def add(self, steps: list[Step]) -> None:
        if not steps:
            return
        self.new = _merged([*self.new, *steps]) if self.kind == "function" else \
            [*self.new, *steps]
        last = max(steps, key=lambda s: s.index)
        now_done = max(self.done, last.index + last.count)
        start = self.last_start_unix_s
        if start is not None and last.start_unix_s is not None and \
                last.start_unix_s > start and now_done > self.done:
            per_s = (now_done - self.done) / (last.start_unix_s - start)
            self.rate = f"{self.batch_size * per_s:.0f} examples/s" if self.batch_size else \
                f"{per_s:.1f} steps/s"
        with_loss = [s for s in steps if s.loss is not None and s.index + s.count >= self.done]
        if with_loss:
            self.loss = max(with_loss, key=lambda s: s.index).loss
        self.done = now_done
        self.last_start_unix_s = max(last.start_unix_s or 0.0, start or 0.0) or None
        ends = [s.start_unix_s + (s.duration_s or 0.0) for s in steps
                if s.start_unix_s is not None]
        if ends:
            self.last_end_unix_s = max([*ends, self.last_end_unix_s or 0.0])
        for s in steps:
            if s.loss is not None and math.isfinite(s.loss):
                self.first_loss = s.loss if self.first_loss is None else self.first_loss
                self.recent_losses.append(s.loss)
            elif s.loss is not None and self.bad_loss is None:
                self.bad_loss = s


@dataclass
class FitRun:
    """One Model.fit call, from its fit_begin."""

    begin: lev.FitBegin
    rows: list[lev.FitRow] = field(default_factory=list)
    epochs: list[dict[str, Any]] = field(default_factory=list)
    iterations: int | None = None
    callbacks: list[dict[str, Any]] = field(default_factory=list)  # the latest times


@dataclass
class ProcessState:
    """Everything one process's events said so far: what the observation is made of, and
    the records it keeps as the agent wrote them (``kept``: the observation's field name ->
    the record, or the records in order; each such field declares its kind:
    gpudiag.records.run.kept)."""

    pid: int
    kept: dict[str, Any] = field(default_factory=dict)
    process: ev.Process | None = None
    tf_import: ev.TfImport | None = None
    keras: ev.KerasImport | None = None
    devices: ev.Devices | None = None
    strategies: list[StrategyRecord] = field(default_factory=list)
    cluster_joins: list[ClusterJoin] = field(default_factory=list)
    placement_log_asked: str | None = None
    fits: list[FitRun] = field(default_factory=list)
    function_rows: dict[str, list[lev.FunctionRow]] = field(default_factory=dict)
    functions: dict[str, lev.Function] = field(default_factory=dict)
    graphs: list[FunctionGraph] = field(default_factory=list)
    groups: dict[int, tuple[list[str], list[lev.SessionRow]]] = field(default_factory=dict)
    weights: dict[str, list[ev.Weights]] = field(default_factory=dict)
    stalls: list[dict[str, Any]] = field(default_factory=list)
    placement_windows: list[dict[str, Any]] = field(default_factory=list)
    placed_graphs: list[dict[str, Any]] = field(default_factory=list)
    sessions: list[lev.Session] = field(default_factory=list)
    hook_errors: list[dict[str, Any]] = field(default_factory=list)
    exit: ev.Exit | None = None
    traces: dict[str, list[lev.Trace]] = field(default_factory=dict)  # retraces per function
    eager: dict[str, lev.EagerLoop] = field(default_factory=dict)
    eager_rows: dict[str, list[lev.FunctionRow]] = field(default_factory=dict)
    compiles: list[lev.Compile] = field(default_factory=list)
    input_floor: lev.InputFloor | None = None  # next()'s own cost on a full buffer
    cpu_use: lev.CpuUse | None = None  # the cores kept busy in the steps after the window
    py_inputs: list[lev.PyDataInput] = field(default_factory=list)  # Keras's Python data
    keras_calls: lev.KerasCalls | None = None  # the program's Keras calls, per call site
    host_reads: lev.HostReads | None = None  # tensors its lines read back, per line
    events: int = 0
    first_t_unix_s: float | None = None
    last_t_unix_s: float | None = None
    unknown: list[ev.Unknown] = field(default_factory=list)
    # what the live views read: each loop under one key, this poll's news
    loops: dict[tuple[str, str], Loop] = field(default_factory=dict)
    latest: Loop | None = None  # the loop that stepped last
    news: list[tuple[float | None, ev.Event]] = field(default_factory=list)

    def begin_poll(self) -> None:
        """The views read this poll's steps and news; the next poll starts them afresh."""
        for loop in self.loops.values():
            loop.new = []
        self.news = []

    def loop(self, kind: str, name: str, label: str) -> Loop:
        key = (kind, name)
        if key not in self.loops:
            self.loops[key] = Loop(kind, name, label)
        return self.loops[key]

    def stepped(self, loop: Loop, steps: list[Step]) -> None:
        loop.add(steps)
        if steps:
            self.latest = loop
