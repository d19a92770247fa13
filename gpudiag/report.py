"""Report records and report.json (the contract); report.md is gpudiag.reportmd's.

report.json follows gpudiag/report.schema.json (``schema_version`` = layout.SCHEMA_VERSION).
A finding is one check's outcome, a typed record: an id (of a family declared in
gpudiag.layout.families, which says the question it answers), a status, its title (the answer in
at most 72 characters), the whole message, the actions to take (what to change, where in
the user's code, the step time predicted after it with its interval), the evidence (plain
numbers and strings; typed where readers use its fields: the families' evidence records) and the
advice in prose.

Version 1 reports (no title, question or actions) still load: their question comes from
the registry, their title is empty (readers then show the message, wrapped).
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from gpudiag import __version__
from gpudiag.errors import EXIT_CHECK_FAILED, EXIT_OK
from gpudiag.files import strict_json
from gpudiag.layout import SCHEMA_VERSION
from gpudiag.layout.families import QUESTIONS, TITLE_MAX, question_of
from gpudiag.layout.units import ms_number

Status = Literal["ok", "warn", "fail", "skip"]
STATUSES: tuple[Status, ...] = ("ok", "warn", "fail", "skip")


@dataclass(frozen=True)
class Prediction:
    """The step time an action should give (seconds a step), with its interval, and the
    step it is predicted from (``from_s``: the loop's step where the run timed it, else
    the profiled window's; None: not said); or, with ``step_s`` None, why there is no
    prediction (``basis``). ``basis`` otherwise says what the prediction assumes."""

    step_s: float | None
    low_s: float | None = None
    high_s: float | None = None
    basis: str = ""
    from_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Any) -> Prediction:
        if not isinstance(data, dict):
            raise ValueError("a prediction is not an object")
        return cls(step_s=_opt_float(data.get("step_s"), "predicted.step_s"),
                   low_s=_opt_float(data.get("low_s"), "predicted.low_s"),
                   high_s=_opt_float(data.get("high_s"), "predicted.high_s"),
                   basis=_text(data.get("basis"), "predicted.basis"),
                   from_s=_opt_float(data.get("from_s"), "predicted.from_s"))

    def said(self) -> str:
        """The prediction as every face says it, milliseconds by the one rule: "predicted
        4.85 -> 2.43 ms a step (2.30-2.60)", or "no prediction: {basis}"."""
        if self.step_s is None:
            return f"no prediction: {self.basis}" if self.basis else ""
        now = f"{ms_number(self.from_s)} -> " if self.from_s is not None else ""
        text = f"predicted {now}{ms_number(self.step_s)} ms a step"
        if self.low_s is not None and self.high_s is not None:
            text += f" ({ms_number(self.low_s)}-{ms_number(self.high_s)})"
        return text


@dataclass(frozen=True)
class Action:
    """One thing to do: ``what`` to change, in words ("pass
    num_parallel_calls=tf.data.AUTOTUNE to Dataset.map"); ``where``: ``file:line`` of the
    user's code (None: no line of theirs is known); ``predicted``: the step time after it
    (None: this kind of action predicts none)."""

    what: str
    where: str | None = None
    predicted: Prediction | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"what": self.what, "where": self.where,
                "predicted": self.predicted.to_dict() if self.predicted else None}

    @classmethod
    def from_dict(cls, data: Any) -> Action:
        if not isinstance(data, dict):
            raise ValueError("an action is not an object")
        where = data.get("where")
        if where is not None and not isinstance(where, str):
            raise ValueError("action.where is not a string")
        predicted = data.get("predicted")
        return cls(what=_text(data.get("what"), "action.what"), where=where,
                   predicted=None if predicted is None else Prediction.from_dict(predicted))


def _text(value: Any, name: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ValueError(f"{name} is not a string")
    return value


def _opt_float(value: Any, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{name} is not a number")
    return float(value)


@dataclass(frozen=True)
class Finding:
    """One check's outcome. ``evidence`` holds JSON-able plain data only. ``title``: the
    answer in at most 72 characters (empty in reports written before titles existed);
    ``question``: its family's (gpudiag.layout.families), filled in from the registry when not
    given; ``actions``: what to do, in order."""

    id: str
    status: Status
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)
    advice: str = ""
    title: str = ""
    actions: tuple[Action, ...] = ()
    question: str | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"finding {self.id}: unknown status {self.status!r}")
        if len(self.title) > TITLE_MAX or "\n" in self.title:
            raise ValueError(f"finding {self.id}: its title is not one line of at most "
                             f"{TITLE_MAX} characters: {self.title!r}")
        if self.question is None:
            object.__setattr__(self, "question", question_of(self.id))
        elif self.question not in QUESTIONS:
            raise ValueError(f"finding {self.id}: unknown question {self.question!r}")
        if not isinstance(self.actions, tuple):
            object.__setattr__(self, "actions", tuple(self.actions))

    @property
    def headline(self) -> str:
        """What a person reads first: the title, or (a report without titles) the
        message."""
        return self.title or " ".join(self.message.split())

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "status": self.status, "title": self.title,
                "question": self.question, "message": self.message,
                "actions": [a.to_dict() for a in self.actions],
                "evidence": self.evidence, "advice": self.advice}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        """A finding as report.json holds it (``to_dict``'s output, or a version 1
        finding without title, question and actions) back; a ValueError or KeyError when
        a field is missing or of the wrong kind."""
        if not isinstance(data, dict):
            raise ValueError("a finding is not an object")
        evidence = data.get("evidence") or {}
        if not isinstance(evidence, dict):
            raise ValueError(f"finding {data.get('id')!r}: evidence is not an object")
        actions = data.get("actions") or []
        if not isinstance(actions, list):
            raise ValueError(f"finding {data.get('id')!r}: actions is not a list")
        question = data.get("question")
        if question is not None and question not in QUESTIONS:
            question = None  # a question this gpudiag does not know: the registry's
        return cls(id=str(data["id"]), status=data["status"], message=str(data["message"]),
                   evidence=evidence, advice=str(data.get("advice") or ""),
                   title=_text(data.get("title"), "title"),
                   actions=tuple(Action.from_dict(a) for a in actions), question=question)


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


@dataclass
class Report:
    """Everything one command found. Mutable while the command runs; saved after each change."""

    command: str
    run_dir: str
    argv: list[str] = field(default_factory=lambda: list(sys.argv))
    started_at: str = field(default_factory=now_iso)
    finished_at: str | None = None
    partial: bool = True
    interrupted: bool = False
    environment: dict[str, Any] = field(default_factory=dict)
    devices: dict[str, Any] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)
    gpudiag_version: str = __version__  # of the gpudiag that wrote it

    def add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.status == s) for s in STATUSES}

    def exit_code(self) -> int:
        """0 when no check failed (warn and skip do not fail a run), else 1."""
        return EXIT_CHECK_FAILED if self.counts()["fail"] else EXIT_OK

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "gpudiag_version": self.gpudiag_version,
            "command": self.command,
            "argv": self.argv,
            "run_dir": self.run_dir,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "partial": self.partial,
            "interrupted": self.interrupted,
            "summary": self.counts(),
            "environment": self.environment,
            "devices": self.devices,
            "findings": [f.to_dict() for f in self.findings],
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Report:
        """report.json's content (``to_dict``'s output) back: ``from_dict(d).to_dict() ==
        d`` for every report gpudiag writes (``summary`` is derived from the findings,
        ``schema_version`` is the reader's business: gpudiag.rundir). A ValueError,
        KeyError or TypeError when a field is missing or of the wrong kind."""
        findings = data.get("findings") or []
        if not isinstance(findings, list):
            raise ValueError("findings is not a list")
        return cls(command=str(data["command"]), run_dir=str(data.get("run_dir") or ""),
                   argv=list(data.get("argv") or []), started_at=str(data["started_at"]),
                   finished_at=data.get("finished_at"), partial=bool(data.get("partial")),
                   interrupted=bool(data.get("interrupted")),
                   environment=dict(data.get("environment") or {}),
                   devices=dict(data.get("devices") or {}),
                   findings=[Finding.from_dict(f) for f in findings],
                   data=dict(data.get("data") or {}),
                   gpudiag_version=str(data.get("gpudiag_version") or ""))


NON_FINITE_NOTE = ("JSON has no Infinity or NaN: these values were not finite and are "
                   "written as null")


def to_json_dict(report: Report) -> dict[str, Any]:
    """report.json's content: strict JSON, non-finite numbers as null and listed under
    ``data.non_finite`` with a note."""
    clean, replaced = strict_json(report.to_dict())
    if replaced:
        clean["data"]["non_finite"] = {"note": NON_FINITE_NOTE, "values": replaced}
    data: dict[str, Any] = clean
    return data


def to_json(report: Report) -> str:
    return json.dumps(to_json_dict(report), indent=2, allow_nan=False) + "\n"


#: The status words of the terminal and report.md.
ICON = {"ok": "OK", "warn": "WARN", "fail": "FAIL", "skip": "SKIP"}


#: The summary lists findings by severity: what failed first, what could not be checked
#: before what passed.
SUMMARY_ORDER: tuple[Status, ...] = ("fail", "warn", "skip", "ok")


def worst_first(status: object) -> int:
    """A sort key that puts findings in SUMMARY_ORDER (an unknown status last): every face
    lists the worst first by this one order."""
    return SUMMARY_ORDER.index(status) if status in SUMMARY_ORDER else len(SUMMARY_ORDER)
