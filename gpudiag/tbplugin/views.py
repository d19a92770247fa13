"""What the GPUDIAG dashboard shows of one run, as JSON-able data: built from a
``gpudiag.rundir.Run`` (load_run, the one reader of a run directory) and nothing else.

The page's questions, in order: which devices worked (``devices``), why a step takes what
it takes and the line to change (``bottleneck``), is it learning (``learning``), did more
devices help (``scaling``), then every finding grouped by those questions, fail and warn
first (``groups``). Pure apart from reading the run's NVML scalars through
gpudiag.rundir.loops.read_scalars.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.layout.families import QUESTIONS, Family, family_of
from gpudiag.layout.units import duration
from gpudiag.layout.units import share as share_text
from gpudiag.report import worst_first
from gpudiag.rundir import BadRun, Run, opens_on
from gpudiag.rundir.records import PART_NAMES, RUNNING_MEAN
from gpudiag.tbplugin.compare import record_view
from gpudiag.tbplugin.ids import path_id, run_id
from gpudiag.verdicts import headline
from gpudiag.verdicts.fix_said import action_said
from gpudiag.verdicts.tried import tried

_FILE_LINE = re.compile(r"[\w./-]+\.py:\d+")


def _share(fraction: float | None) -> str | None:
    """A busy share as the terminal writes it; None where there is none (the page says
    n/a)."""
    return None if fraction is None else share_text(fraction)
#: The findings whose verdict the learning card shows (the loss curve's own verdict).
LEARNING_FAMILIES = ("run.learning", "scaling.learning", "diff.learning")
_NO_FAMILY = Family("", "program")
def summary(run: Run, logdir: Path) -> dict[str, Any]:
    """One row of the run list."""
    return {"id": run_id(run, logdir), "command": run.command, "status": run.status,
            "started_at": run.started_at, "finished_at": run.finished_at,
            "failed_before_start": run.status == "failed"}


def bad_summary(bad: BadRun, logdir: Path) -> dict[str, Any]:
    """One row of the run list for a run load_run refused: why, in one line."""
    return {"id": path_id(bad.path, logdir), "command": None, "status": "unreadable",
            "started_at": None, "finished_at": None, "failed_before_start": False,
            "reason": bad.reason}


def runs_view(runs: Sequence[Run], logdir: Path, bad: Sequence[BadRun] = ()
              ) -> dict[str, Any]:
    """``/runs``: every run's summary, newest first, then each run load_run refused with
    why, and the one the page opens on."""
    chosen = opens_on(runs)
    return {"runs": [summary(r, logdir) for r in runs] + [bad_summary(b, logdir) for b in bad],
            "default": run_id(chosen, logdir) if chosen else None}


def _findings(run: Run) -> list[dict[str, Any]]:
    return [f.to_dict() for f in run.report.findings]


def _finite(x: Any) -> float | None:
    return float(x) if isinstance(x, int | float) and math.isfinite(x) else None


def _evidence(run: Run, *suffixes: str) -> dict[str, Any]:
    for f in run.report.findings:
        if any(f.id.endswith(s) for s in suffixes):
            return dict(f.evidence)
    return {}


def _nvml_series(run: Run) -> dict[int, dict[str, list[list[float]]]]:
    """Per GPU index: utilization (and GPM SM utilization) over time from the run's NVML
    scalars (milliseconds since sampling began -> seconds)."""
    from gpudiag.rundir.loops import read_scalars

    tb = run.path / layout.NVML_TB_RUN
    if not tb.is_dir():
        return {}
    out: dict[int, dict[str, list[list[float]]]] = {}
    for tag, points in read_scalars(tb, run.path).items():
        for key, tagger in (("util", layout.gpu_util_tag), ("sm_util", layout.gpu_sm_util_tag)):
            head, tail = tagger.template.split("{}")
            found = re.fullmatch(f"{re.escape(head)}(\\d+){re.escape(tail)}", tag)
            if found:
                index = int(found.group(1))
                out.setdefault(index, {})[key] = [[step / 1000.0, value]
                                                  for step, value in sorted(points.items())]
    return out


def devices(run: Run) -> dict[str, Any]:
    """One lane per device: each device TensorFlow listed or ran ops on, each GPU NVML saw;
    its state (used / idle / not visible to TensorFlow), busy share of the step (its bar's
    busy parts: DeviceParts.busy_share, so the lane and the bar agree), and NVML
    utilization over time. Without a GPU, one line saying so and why."""
    report = run.report_json
    gpus = headline.tf_gpus(report)
    used_ev = _evidence(run, "every-device-used", "devices-worked")
    ops = used_ev.get("ops_by_device") or {}
    busy_s = used_ev.get("trace_busy_s") or {}
    idle = set(used_ev.get("idle") or [])
    parts = {d: p for b in run.breakdown for d, p in b.devices.items()}
    names: dict[str, None] = {}  # in order, each once (a dict: linear in the names)
    for source in (used_ev.get("logical_devices") or [], used_ev.get("strategy_devices") or [],
                   list(ops), list(parts)):
        names.update(dict.fromkeys(str(n) for n in source))
    logical = {str(n) for n in used_ev.get("logical_devices") or []}
    lanes: list[dict[str, Any]] = []
    for name in names:
        p = parts.get(name)
        share = None if p is None else p.busy_share()  # the numbers its bar is drawn with
        lanes.append({"name": name, "kind": "GPU" if "GPU" in name.upper() else "CPU",
                      "state": lane_state(name in idle, share, busy_s.get(name),
                                          ops.get(name),
                                          name in logical),
                      "ops": ops.get(name), "busy_s": busy_s.get(name),
                      "busy_share": share, "busy_text": _share(share),
                      "busy_parts": list(p.busy_parts()) if p else [], "util": [], "sm_util": []})
    if not lanes:
        lanes = _scaling_lanes(run)
    lanes += _nvml_lanes(run, used_ev, gpus)
    no_gpu = headline.devices_line(report) if gpus == [] else None
    return {"no_gpu": no_gpu, "tf_gpus": gpus, "lanes": lanes}


USED_MIN_SHARE = 0.005  # a busy share the page shows as 0 % is not "used"


def lane_state(idle: bool, share: float | None, busy_s: float | None, ops: int | None,
               logical: bool) -> str:
    """A device's lane: "used" only with busy time measured (its share of the step at
    least USED_MIN_SHARE, or busy seconds in the trace); "idle" when the finding names it
    idle or what was measured is none; "not timed" for ops placed on it with no busy time
    measured; a logical device with neither is idle."""
    if idle:
        return "idle"
    if share is not None or busy_s is not None:
        busy = (share or 0.0) >= USED_MIN_SHARE or (share is None and (busy_s or 0.0) > 0)
        return "used" if busy else "idle"
    if ops:
        return "not timed"
    return "idle" if logical else "not timed"


def _nvml_lanes(run: Run, used_ev: dict[str, Any], tf_gpus: list[str] | None
                ) -> list[dict[str, Any]]:
    """One lane per GPU NVML saw: ``activity`` is NVML's (busy / idle / lost: the
    every-gpu-used finding's, or `run`'s every-device-used), ``state`` TensorFlow's side
    (not visible to TensorFlow when it listed no GPU; else NVML's used or idle)."""
    gpu_ev = _evidence(run, "every-gpu-used")
    idle = set(used_ev.get("nvml_idle") or []) | set(gpu_ev.get("idle_indices") or [])
    lost = set(gpu_ev.get("lost_indices") or [])
    near = set(gpu_ev.get("near_indices") or [])  # its p95's interval across the line
    series = _nvml_series(run)
    lanes = []
    for g in used_ev.get("nvml_gpus") or gpu_ev.get("gpus") or []:
        if not isinstance(g, dict) or g.get("index") is None:
            continue
        index = int(g["index"])
        activity = "lost" if index in lost or g.get("error") else \
            "idle" if index in idle else "near idle" if index in near else "busy"
        state = "not visible to TensorFlow" if tf_gpus == [] else \
            "used" if activity == "busy" else "near the idle threshold" \
            if activity == "near idle" else activity
        lanes.append({"name": f"GPU {index} (NVML)", "model": str(g.get("name") or ""),
                      "kind": "NVML", "state": state, "activity": activity, "ops": None,
                      "busy_s": None, "busy_share": None, "busy_text": None, "busy_parts": [],
                      "util_mean": _finite(g.get("util_mean_percent")),
                      "sm_util_mean": _finite(g.get("sm_util_mean_percent")),
                      "util": series.get(index, {}).get("util", []),
                      "sm_util": series.get(index, {}).get("sm_util", [])})
    return lanes


def _scaling_lanes(run: Run) -> list[dict[str, Any]]:
    """A scaling run: the devices of its largest configuration, busy share from its trace."""
    data = run.report.data.get("scaling") or {}
    rows = [r for r in data.get("rows") or [] if r.get("trace_busy_fraction")]
    if not rows:
        return []
    top = max(rows, key=lambda r: (r["n_devices"], r["name"]))
    return [{"name": f"{d} ({top['name']})", "kind": "GPU" if "GPU" in d.upper() else "CPU",
             "state": lane_state(False, share, None, None, False), "ops": None,
             "busy_s": None, "busy_share": share, "busy_text": _share(share),
             "busy_parts": [], "util": [], "sm_util": []}
            for d, share in sorted(top["trace_busy_fraction"].items())]


def bottleneck(run: Run) -> dict[str, Any] | None:
    """The step breakdown per device (ms, every part gpudiag.rundir.records declares, in
    its order: ``parts``), the named cause, the finding's title, what to change and where
    (its actions; a report written before actions: its advice and the file:lines the
    advice names) and the prediction."""
    if not run.breakdown:
        return None
    worst = sorted(run.breakdown, key=lambda b: worst_first(b.status))[0]
    found = next((f for f in run.report.findings if f.id == worst.finding_id), None)
    finding = found.to_dict() if found else {}
    advice = str(finding.get("advice") or "")
    actions = finding.get("actions") or []
    where = [a["where"] for a in actions if a.get("where")] if actions else \
        _FILE_LINE.findall(advice)
    actions = [{**a, "said": action_said(a)} for a in actions]
    bars = [{"device": d, "step_ms": p.period_s * 1000, "step_text": duration(p.period_s),
             "parts_ms": {k: p.part(k) * 1000 for k in PART_NAMES},
             "parts_text": {k: duration(p.part(k)) for k in PART_NAMES}}
            for d, p in worst.devices.items()]
    return {"finding": worst.finding_id, "status": worst.status,
            "step_ms": None if worst.step_s is None else worst.step_s * 1000,
            "step_text": None if worst.step_s is None else duration(worst.step_s),
            "cause": worst.bottleneck, "causes": list(worst.causes),
            "title": found.title if found else "", "message": finding.get("message", ""),
            "actions": actions, "fix": advice, "where": list(dict.fromkeys(where)),
            "parts": list(PART_NAMES), "bars": bars,
            "line": headline.bottleneck_line(run.report_json), "predicted": worst.predicted}


def learning(run: Run) -> dict[str, Any] | None:
    """The loss curve per loop, the ln(classes) line where the class count is known, the
    learning finding's verdict."""
    found = sorted((f.to_dict() for f in run.report.findings
                    if (family_of(f.id) or _NO_FAMILY).base in LEARNING_FAMILIES),
                   key=lambda f: worst_first(f["status"]))
    if not found and not run.loops:
        return None
    ev = found[0]["evidence"] if found else {}
    classes = next((lp.get("num_classes") for lp in (ev.get("loops") or ev.get("runs") or [])
                    if isinstance(lp, dict) and lp.get("num_classes")), None)
    curves = [_curve(run, name) for name in run.loops]
    return {"status": found[0]["status"] if found else None,
            "verdict": (found[0]["title"] or found[0]["message"]) if found
            else "no learning check in this run",
            "num_classes": classes,
            "ln_classes": math.log(classes) if isinstance(classes, int) and classes > 1
            else None,
            "curves": [c for c in curves if c["points"]]}


def _curve(run: Run, name: str) -> dict[str, Any]:
    """One loop's loss by step, with the steps where an epoch began and what a point is
    (Run.loss_marks: its learning finding's record)."""
    epochs, running = run.loss_marks(name)
    return {"name": name, "points": [[s, v] for s, v in sorted(run.loops[name].losses().items())
                                     if math.isfinite(v)],
            "epochs": epochs, "loss_is": RUNNING_MEAN if running else None}


def scaling(run: Run) -> dict[str, Any] | None:
    """Speed-up against the ideal per device count, per strategy (scaling runs)."""
    data = run.report.data.get("scaling")
    if not isinstance(data, dict) or not data.get("rows"):
        return None
    lines: dict[str, list[dict[str, Any]]] = {}
    for r in data["rows"]:
        lines.setdefault(str(r["strategy"]), []).append(
            {"devices": r["n_devices"], "speedup": _finite(r.get("speedup")),
             "examples_per_s": _finite(r.get("examples_per_s")),
             "efficiency": _finite(r.get("efficiency"))})
    for points in lines.values():
        points.sort(key=lambda p: p["devices"])
    return {"strategies": lines, "device_kind": data.get("device_kind")}


def groups(run: Run) -> list[dict[str, Any]]:
    """Every finding under the question its family declares (gpudiag.layout.families, through
    ``Finding.question``), in the order people ask them, fail and warn first; a finding of
    no declared family under 'Other checks'. Each finding as report.json holds it, with
    ``headline``: its title (a report without titles: its message)."""
    findings = sorted(run.report.findings, key=lambda f: worst_first(f.status))
    out = [{"key": key, "title": words,
            "findings": [{**f.to_dict(), "headline": f.headline} for f in findings
                         if f.question == key]}
           for key, words in QUESTIONS.items()]
    out.append({"key": "other", "title": "Other checks",
                "findings": [{**f.to_dict(), "headline": f.headline} for f in findings
                             if f.question not in QUESTIONS]})
    return [g for g in out if g["findings"]]


def live(run: Run) -> dict[str, Any] | None:
    """While the command runs: how far each loop got, and what was found so far."""
    if run.live is None:
        return None
    steps = {name: (loop.steps[-1].step if loop.steps else 0)
             for name, loop in run.loops.items()}
    stalls = [f for f in _findings(run) if "stall" in f["id"] and f["status"] != "ok"]
    return {"report_mtime_unix_s": run.live.report_mtime_unix_s, "steps": steps,
            "findings_so_far": run.live.findings_so_far, "stalls": stalls}


def run_view(run: Run, logdir: Path) -> dict[str, Any]:
    """Everything the page shows of one run (``tried``: a `gpudiag try` run's fixes
    measured, gpudiag.verdicts.tried; None for any other run)."""
    return {**summary(run, logdir), "questions": dict(QUESTIONS),
            "verdict": headline.verdict(run.report_json, headline.UNCUT),
            "devices": devices(run), "bottleneck": bottleneck(run),
            "learning": learning(run), "scaling": scaling(run), "groups": groups(run),
            "live": live(run), "diff": record_view(run, logdir),
            "tried": tried(run.report_json)}
