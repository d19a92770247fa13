"""The event protocol (gpudiag.layout.events): every kind round-trips, the decoder never
raises, every field the agent writes is read by gpudiag, every kind is written and read."""

from __future__ import annotations

import ast
import json
import os
import re
import types
import typing
from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO

from gpudiag.inprogram.recorder import Recorder, StepBuffer
from gpudiag.layout import eventdecode as evd
from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.run import eventfiles, events

ROOT = REPO / "gpudiag"
ROW_CLASSES = (lev.FitRow, lev.FunctionRow, lev.SessionRow)


def sample(hint: Any, n: int) -> Any:
    """A value of the annotation's type that is no field's default."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return sample(next(a for a in args if a is not type(None)), n)
    if hint is bool:
        return True
    if hint is int:
        return 40 + n
    if hint is float:
        return 2.5 + n
    if hint is str:
        return f"s{n}"
    if origin is list:
        return [sample(args[0], n)]
    if origin is dict:
        return {"k": sample(args[1], n)}
    if origin is tuple:
        return (sample(args[0], n),)
    if isinstance(hint, type) and hint in ROW_CLASSES:
        return filled(hint)
    return {"any": n}  # Any


def filled(cls: type) -> Any:
    hints = typing.get_type_hints(cls)
    return cls(**{f.name: sample(hints[f.name], n) for n, f in enumerate(fields(cls))})


@pytest.mark.parametrize("cls", list(evd.KINDS.values()), ids=list(evd.KINDS))
def test_every_kind_round_trips_with_every_field_set(cls: type[ev.Event]) -> None:
    event = filled(cls)
    for f in fields(event):  # each field differs from its default: its value is checked
        assert getattr(event, f.name) != getattr(cls(), f.name), f.name
    line = ev.encode(event, t_unix_s=1700000000.25, pid=321, seq=9)
    assert "\n" not in line
    recorded = evd.decode_line(line)
    assert recorded == ev.Recorded(321, 9, 1700000000.25, event)
    assert json.loads(line)["kind"] == cls.KIND and json.loads(line)["v"] == ev.PROTOCOL_VERSION


def test_an_unknown_kind_or_a_newer_version_is_an_unknown_record() -> None:
    other = evd.decode({"kind": "gpu_temperature", "pid": 5, "t": 1.0, "seq": 2, "celsius": 80})
    assert other == ev.Recorded(5, 2, 1.0, ev.Unknown(kind="gpu_temperature", version=1,
                                                      fields={"celsius": 80}))
    newer = evd.decode({"kind": "stall", "v": ev.PROTOCOL_VERSION + 1, "pid": 5, "waited_s": 3})
    assert newer is not None and newer.event == ev.Unknown(
        kind="stall", version=ev.PROTOCOL_VERSION + 1, fields={"waited_s": 3})


def test_a_line_of_an_older_gpudiag_still_decodes() -> None:
    """Before the protocol: no ``v``, no ``seq``, ``class`` for the strategy's class, a
    function row with its ``final`` flag; a fit row's batch number is read (the steps of a
    steps_per_execution call)."""
    lines = [
        {"kind": "strategy", "t": 1.0, "pid": 7, "class": "MirroredStrategy",
         "num_replicas_in_sync": 2, "worker_devices": ["/gpu:0", "/gpu:1"], "nccl": True},
        {"kind": "function_steps", "t": 2.0, "pid": 7, "function": "step",
         "rows": [{"i": 0, "t0": 1.0, "dt": 0.5, "loss": 2.3}, {"i": 0, "loss": 2.2,
                                                                "final": True}]},
        {"kind": "fit_steps", "pid": 7, "rows": [{"i": 3, "batch": 3, "t0": 1.0,
                                                  "t_end": 1.5, "logs": {"loss": 0.5}}]},
        {"kind": "fit_epoch", "pid": 7, "epoch": 0, "steps": 10, "logs": {"loss": 0.4}},
    ]
    decoded = [evd.decode(line) for line in lines]
    assert [d.event for d in decoded if d is not None] == [
        ev.Strategy(class_name="MirroredStrategy", num_replicas_in_sync=2,
                    worker_devices=["/gpu:0", "/gpu:1"], nccl=True),
        lev.FunctionSteps(function="step", rows=(lev.FunctionRow(i=0, t0=1.0, dt=0.5, loss=2.3),
                                                lev.FunctionRow(i=0, loss=2.2))),
        lev.FitSteps(rows=(lev.FitRow(i=3, batch=3, t0=1.0, t_end=1.5, logs={"loss": 0.5}),)),
        lev.FitEpoch(logs={"loss": 0.4})]
    assert decoded[0] is not None and decoded[0].seq == 0


@pytest.mark.parametrize("obj", [
    None, [], "stall", 3, {"kind": "stall"}, {"pid": 3}, {"kind": 3, "pid": 3},
    {"kind": "stall", "pid": "3"},
    {"kind": "stall", "pid": 3, "v": "one"},
    {"kind": "devices", "pid": 3, "t": "now"},
])
def test_a_line_without_a_readable_header_is_no_event(obj: Any) -> None:
    assert evd.decode(obj) is None
    assert isinstance(evd.check(obj), evd.BadLine)


@pytest.mark.parametrize(("obj", "field"), [
    ({"kind": "stall", "pid": 3, "waited_s": "long"}, "stall.waited_s"),
    ({"kind": "stall", "pid": 3, "where": []}, "stall.where"),
    ({"kind": "fit_steps", "pid": 3, "rows": [1]}, "fit_steps.rows[0]"),
    ({"kind": "fit_steps", "pid": 3, "rows": [{"i": 2, "logs": []}]}, "fit_steps.rows[0].logs"),
    ({"kind": "function_steps", "pid": 3, "rows": {"i": 1}}, "function_steps.rows"),
    ({"kind": "strategy", "pid": 3, "worker_devices": [{"name": "/gpu:0"}]},
     "strategy.worker_devices[0]"),
    ({"kind": "function", "pid": 3, "graphs": [1]}, "function.graphs[0]"),
    ({"kind": "session_steps", "pid": 3, "fetches": [1]}, "session_steps.fetches[0]"),
    ({"kind": "cluster_join", "pid": 3, "cluster_spec": {"worker": "a:1"}},
     "cluster_join.cluster_spec.worker"),
    ({"kind": "exit", "pid": 3, "hook_errors": True}, "exit.hook_errors"),
])
def test_a_field_of_another_shape_makes_the_line_unreadable_naming_it(
        obj: dict[str, Any], field: str) -> None:
    """Inner types included: the issue-36 lines that ended `gpudiag run` in a traceback."""
    found = evd.check(obj)
    assert isinstance(found, evd.BadLine) and found.reason.startswith(f"{field} is not ")
    assert evd.decode(obj) is None


def test_a_field_missing_or_null_takes_its_default() -> None:
    """A file of an older gpudiag: the field is not there (or null)."""
    recorded = evd.decode({"kind": "devices", "pid": 3, "seq": None, "logical": None})
    assert recorded is not None and recorded.event == ev.Devices() and recorded.seq == 0


def test_a_line_nested_too_deep_is_unreadable_and_never_raises() -> None:
    deep: Any = 1
    for _ in range(evd.MAX_DEPTH + 1):
        deep = [deep]
    assert evd.check({"kind": "fit_epoch", "pid": 3, "logs": {"x": deep}}) == evd.BadLine(
        f"fit_epoch: nested deeper than {evd.MAX_DEPTH}")
    # deeper than Python's JSON reader goes: RecursionError, caught
    assert evd.check_line("[" * 200_000) == evd.BadLine(f"nested deeper than {evd.MAX_DEPTH}")
    assert evd.decode_line('{"kind": "exit", "pid": 1, "x": ' + "[" * 200_000) is None


def test_decode_line_skips_what_is_not_json() -> None:
    assert evd.decode_line('{"kind": "exit", "pid": ') is None
    assert evd.decode_line(b"\xff\xfe") is None


def test_the_recorder_and_a_step_buffer_write_only_protocol_lines(tmp_path: Path) -> None:
    """Through the agent's real recorder: a step buffer's plain rows (a numpy-like loss
    included) come back as typed rows; a row's defaults are left out of the line."""

    class Scalar:  # what a numpy scalar offers the JSON fallback
        def item(self) -> float:
            return 0.75

    rec = Recorder(str(tmp_path))
    buffer = StepBuffer(rec.emit, "function_steps", 60.0, 2, None, function="train_step")
    buffer.add({"i": 0, "t0": 10.0, "dt": 0.25, "loss": Scalar()})
    buffer.add({"i": 1, "t0": 10.5, "dt": 0.25})
    rec.emit(ev.Exit(hook_errors=1))
    path = tmp_path / f"events-{os.getpid()}.jsonl"
    lines = path.read_text().splitlines()
    assert json.loads(lines[1])["rows"] == [{"i": 1, "t0": 10.5, "dt": 0.25}]
    by_pid, bad = eventfiles.read_events(tmp_path)
    assert bad.count == 0 and [r.event for r in by_pid[os.getpid()]] == [
        lev.FunctionSteps(function="train_step",
                         rows=(lev.FunctionRow(i=0, t0=10.0, dt=0.25, loss=0.75),)),
        lev.FunctionSteps(function="train_step", rows=(lev.FunctionRow(i=1, t0=10.5, dt=0.25),)),
        ev.Exit(hook_errors=1)]
    assert [r.seq for r in by_pid[os.getpid()]] == [1, 2, 3]


# ------------------------------------------------------------------- written and read
def _annotated_classes(annotation: ast.expr | None) -> set[str]:
    if annotation is None:
        return set()
    # ``ev.Crash`` in the parent's modules; ``Crash`` where a verdict imported the record
    named = set(re.findall(r"\b(?:(?:ev|events|lev|loopevents)\.)?(\w+)\b",
                           ast.unparse(annotation)))
    return {cls.__name__ for cls in [*evd.KINDS.values(), *ROW_CLASSES]} & named


def _held_records(trees: list[ast.AST]) -> dict[str, set[str]]:
    """The attributes that hold the agent's records as it wrote them (the observation's,
    the state's, a verdict's own record's): attribute name -> the record classes
    (``crash``: Crash)."""
    held: dict[str, set[str]] = {}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                classes = _annotated_classes(node.annotation)
                if classes:
                    held.setdefault(node.target.id, set()).update(classes)
    return held


def _own_reads(tree: ast.AST, out: dict[str, set[str]]) -> None:
    """A record's own properties (``where``: its caller) read its fields off ``self``."""
    for cls_node in ast.walk(tree):
        if isinstance(cls_node, ast.ClassDef):
            for node in ast.walk(cls_node):
                if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                        node.value.id == "self":
                    out.setdefault(cls_node.name, set()).add(node.attr)


def _typed_names(fn: ast.FunctionDef, holds: Any) -> dict[str, set[str]]:
    """A function's names that hold records: its annotated parameters, a name iterating
    over one (or over an attribute that holds them) or bound to one."""
    typed: dict[str, set[str]] = {}
    for arg in [*fn.args.args, *fn.args.kwonlyargs]:
        classes = _annotated_classes(arg.annotation)
        if classes:
            typed.setdefault(arg.arg, set()).update(classes)
    for node in ast.walk(fn):
        if isinstance(node, ast.For | ast.comprehension) and isinstance(node.target, ast.Name):
            for n in ast.walk(node.iter):
                found = (typed.get(n.id, set()) if isinstance(n, ast.Name) else set()) | \
                    (holds(n) if isinstance(n, ast.expr) else set())
                if found:
                    typed.setdefault(node.target.id, set()).update(found)
        elif isinstance(node, ast.Assign | ast.NamedExpr):
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            if isinstance(target, ast.Name) and holds(node.value):
                typed.setdefault(target.id, set()).update(holds(node.value))
    return typed


def _reads(tree: ast.AST, held: dict[str, set[str]] | None = None) -> dict[str, set[str]]:
    """Per record class: the attributes read of a parameter annotated with it, of a name
    iterating over one or bound to one (or to an observation's attribute that holds them,
    ``held``: ``for c in obs.config_calls``, ``c = obs.crash``), or of an item of one, in
    any function; and ``obs.crash.type``."""
    held = held or {}
    out: dict[str, set[str]] = {}

    def holds(node: ast.expr) -> set[str]:
        return held.get(node.attr, set()) if isinstance(node, ast.Attribute) else set()

    _own_reads(tree, out)
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef):
            continue
        typed = _typed_names(fn, holds)
        for node in ast.walk(fn):
            if not isinstance(node, ast.Attribute):
                continue
            base = node.value.value if isinstance(node.value, ast.Subscript) else node.value
            classes = typed.get(base.id, set()) if isinstance(base, ast.Name) else holds(base)
            for cls in classes:
                out.setdefault(cls, set()).add(node.attr)
    return out


#: Fields the agent writes that no verdict reads: each reaches report.json's process record
#: (run.analyse.compact_record) for whoever reads the report. Named one by one, so that a
#: new field nobody reads still fails below.
RECORD_ONLY = {"Crash": {"module"}, "Profile": {"first_step"}, "StepStats": {"call", "group"},
               "TfLog": {"level", "logger", "shown", "source"}, "PyWarning": {"file", "line"}}


def test_every_field_the_agent_writes_is_read_by_gpudiag() -> None:
    """A field is read when gpudiag's parent side (run/, records/, or the verdicts that take
    the record as the agent wrote it) reads it off the typed record; a field written and
    never read fails here: read it, or stop writing it."""
    trees = [ast.parse(path.read_text()) for path in [
        *sorted((ROOT / "run").glob("*.py")), *sorted((ROOT / "records").glob("*.py")),
        *sorted((ROOT / "verdicts").rglob("*.py")), ROOT / "layout" / "events.py",
        ROOT / "layout" / "loopevents.py"]]
    held = _held_records(trees)
    reads: dict[str, set[str]] = {}
    for tree in trees:
        for cls, attrs in _reads(tree, held).items():
            reads.setdefault(cls, set()).update(attrs)
    unread = {cls.__name__: sorted({f.name for f in fields(cls)} - reads.get(cls.__name__, set())
                                   - RECORD_ONLY.get(cls.__name__, set()))
              for cls in [*evd.KINDS.values(), *ROW_CLASSES]}
    assert {k: v for k, v in unread.items() if v} == {}


def test_the_field_check_sees_a_field_left_unread() -> None:
    """The check above can fail: a handler that reads one field of two."""
    tree = ast.parse("def h(s, e: lev.StallEnd, t):\n    return e.after_s\n"
                     "def g(rows: list[lev.SessionRow]):\n    return [r.i for r in rows]\n")
    assert _reads(tree) == {"StallEnd": {"after_s"}, "SessionRow": {"i"}}


def test_every_kind_is_written_by_the_agent_and_has_a_handler() -> None:
    written = set()
    for path in (ROOT / "inprogram").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                    isinstance(node.func.value, ast.Name) and \
                    node.func.value.id in ("events", "loopevents"):
                written.add(node.func.attr)
            if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "StepBuffer":
                kind = node.args[1]
                assert isinstance(kind, ast.Constant)
                written.add(evd.KINDS[kind.value].__name__)
    assert {cls.__name__ for cls in evd.KINDS.values()} <= written
    assert set(evd.KINDS.values()) <= set(events.HANDLERS)
