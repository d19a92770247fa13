"""A `gpudiag try` run read back for the screens that show one: the GPUDIAG tab's card
"fixes tried" (gpudiag.tbplugin.views) and MCP's ``show_run`` (gpudiag.mcp.tools).

``tried(report)``: the answer's first line (``data.try.headline``), each fix tried (its
``try.fix.<fix>`` finding's typed TriedFix evidence: the line as written and as it would
be, B/A with its interval and rounds, the verdict word, the prediction beside it marked
inside or outside its interval) said in gpudiag.verdicts.trial's words, then the advised
fixes not tried. Every number is written here, by gpudiag.layout.units' rules and the
words the terminal uses: a screen shows these strings and formats nothing of its own.
Pure: a report's dict in, JSON-able data out; None for a run that is not a try run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from gpudiag.layout import TRY_DATA
from gpudiag.layout.compared import TriedFix
from gpudiag.layout.units import CI_LEVEL, counted, duration
from gpudiag.verdicts.trial import predicted_text

_HELD = {True: "inside its interval", False: "outside its interval", None: None}


def measured_words(ev: TriedFix) -> str | None:
    """B/A with its interval and rounds: "B/A 0.52 (95 % CI 0.48-0.57, 3 rounds)"; None:
    nothing measured (the fix broke the program, or did not compile)."""
    if ev.ratio is None:
        return None
    rounds = counted(ev.rounds, "round")
    if ev.ratio_low is None or ev.ratio_high is None:
        return f"B/A {ev.ratio:.2f} from {rounds}: too few for an interval"
    return (f"B/A {ev.ratio:.2f} ({ev.level * 100:.0f} % CI {ev.ratio_low:.2f}-"
            f"{ev.ratio_high:.2f}, {rounds})")


def predicted_words(ev: TriedFix) -> str | None:
    """The prediction as B/A with its interval ("predicted B/A 0.57 (0.53-1.00)"); None:
    no prediction for this fix alone."""
    if ev.predicted_ratio is None:
        return None
    return predicted_text(ev.predicted_ratio, ev.predicted_low, ev.predicted_high)


def _label(ev: TriedFix, evidence: Mapping[str, Any]) -> str:
    """``num_parallel_calls at train.py:48`` (the fix's module's label, with its value)."""
    from gpudiag.fixes import BY_NAME

    module = BY_NAME.get(ev.fix)
    config = evidence.get("fix_config")
    value = config.get("value") if isinstance(config, Mapping) else None
    name = (module.FIX.label if module else ev.fix) + (f"={value}" if value is not None else "")
    return f"{name} at {ev.where}" if ev.where else name


def _step(evidence: Mapping[str, Any]) -> str | None:
    """A step as written and with the fix: "32.6 ms -> 17.0 ms a step"."""
    a, b = evidence.get("a_step_s"), evidence.get("b_step_s")
    if not isinstance(a, int | float) or not isinstance(b, int | float):
        return None
    return f"{duration(a)} -> {duration(b)} a step"


def fix_view(finding: Mapping[str, Any]) -> dict[str, Any]:
    """One fix tried: its words (label, measured, step, predicted, held), its change at
    the line, and the numbers they are written from (as the typed evidence holds them)."""
    from gpudiag.fixes import BY_NAME

    evidence = finding.get("evidence") or {}
    ev = TriedFix.from_dict(evidence)
    change = None if ev.as_it_would_be else getattr(BY_NAME.get(ev.fix), "CHANGES", None)
    return {"id": finding.get("id"), "status": finding.get("status"), "fix": ev.fix,
            "label": _label(ev, evidence), "where": ev.where, "verdict": ev.verdict,
            "measured": measured_words(ev), "step": _step(evidence),
            "predicted": predicted_words(ev), "inside": ev.inside,
            "held": _HELD[ev.inside] if ev.ratio is not None else None,
            "as_written": ev.as_written, "as_it_would_be": ev.as_it_would_be,
            "change": change, "broke": ev.broke, "applied": ev.applied,
            "ratio": ev.ratio, "ratio_low": ev.ratio_low, "ratio_high": ev.ratio_high,
            "rounds": ev.rounds, "level": ev.level, "predicted_ratio": ev.predicted_ratio,
            "predicted_low": ev.predicted_low, "predicted_high": ev.predicted_high,
            "message": finding.get("message")}


def _not_tried(findings: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The advised fixes not tried: what, where, the prediction in words, why."""
    found = next((f for f in findings if f.get("id") == "try.not-tried"), None)
    out = []
    for n in ((found or {}).get("evidence") or {}).get("not_tried") or []:
        if not isinstance(n, Mapping):
            continue
        p = n.get("predicted")
        said = None
        if isinstance(p, Sequence) and len(p) == 3 and isinstance(p[0], int | float):
            said = predicted_text(p[0], p[1], p[2])
        out.append({"what": n.get("what"), "where": n.get("where"), "why": n.get("why"),
                    "predicted": said})
    return out


def tried(report: Mapping[str, Any]) -> dict[str, Any] | None:
    """A try run's answer (None: ``report`` is not a try run's): ``headline`` (the
    answer's first line), ``fixes`` (each fix tried, in the report's order), ``not_tried``
    and ``how`` (how the trials were run: try.result's message), ``level`` the intervals'."""
    if report.get("command") != "try":
        return None
    findings = [f for f in report.get("findings") or [] if isinstance(f, Mapping)]
    result = next((f for f in findings if f.get("id") == "try.result"), None)
    data = (report.get("data") or {}).get(TRY_DATA) or {}
    head = data.get("headline") if isinstance(data, Mapping) else None
    return {"headline": head or (result or {}).get("title") or "nothing was tried",
            "fixes": [fix_view(f) for f in findings
                      if str(f.get("id", "")).startswith("try.fix.")],
            "not_tried": _not_tried(findings),
            "how": (result or {}).get("message"), "level": CI_LEVEL}
