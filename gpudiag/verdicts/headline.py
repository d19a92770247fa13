"""The short verdict: what a command found, in at most six entries, each line under 80 columns.

One source for the three places a person meets it: the last lines of every command in the
terminal (gpudiag.execute), the Text tab's first card (the same entries less the dashboard's)
and the GPUDIAG dashboard's header (gpudiag.tbplugin). Pure: a report as plain data
(report.json's content) in, lines out.

The entries, each only where the report has its evidence (a crashed program's crash
first: "crash: ValueError at train.py:12 (keras-shape-mismatch)", then its fix):

    gpudiag run: 0 failed, 3 warnings, 5 not checked, 11 ok
    devices: no GPU, ran on the CPU (/device:CPU:0): no NVIDIA driver
    bottleneck: input-bound: 47 % of a 32.6 ms step waits for tf.data
      fix at train.py:33: pass num_parallel_calls=tf.data.AUTOTUNE to Dataset.map;
        predicted 32.6 -> 17.4 ms a step
    learning: Model.fit: loss 2.7221 -> 0.0127 over 120 steps, accuracy 1.000
    report: runs/2026-11-25T10-00-00-run/report.md
    dashboard: gpudiag tensorboard runs

`gpudiag try` puts its answer first ("tried 2 fixes: num_parallel_calls at train.py:33
makes a step 1.9x faster (95 % CI 1.8-2.0, 3 rounds)", report.json's data.try).
`gpudiag diff` puts its result first ("B is 2.66x faster (95 % CI 2.59-2.73): 27.00 ->
10.15 ms a step", from the diff.step-time finding's evidence; B/A below 1 is "faster").
A long entry is wrapped with an indent, never cut: the words a person needs (the action,
its file:line, the interval) are never the ones dropped. The fix comes from the bottleneck
finding's actions (what, where, predicted); a report written before actions existed gets
the file:line its advice names. Which finding is the bottleneck, the learning verdict or
the diff's result is read from its family (gpudiag.layout.families), not from words in its id.

"No GPU" and its reason come from gpudiag.verdicts.gpus_seen (recorded evidence only).
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from typing import Any

from gpudiag.layout.families import family_of
from gpudiag.layout.units import counted, ms_number
from gpudiag.report import SUMMARY_ORDER, worst_first
from gpudiag.reportmd import md_text
from gpudiag.verdicts.compared import diff_line, prediction_held
from gpudiag.verdicts.fix_said import fix_entry, loop_of
from gpudiag.verdicts.gpus_seen import cpu_devices, indexed, tf_gpus, walk, why_no_gpu

WIDTH = 79  # a line of the verdict is shorter than an 80-column terminal
UNCUT = 100_000  # a web page's lines: one per entry, wrapped by the page
MAX_ENTRIES = 6
_LEARNING = ("run.learning", "scaling.learning", "diff.learning")

#: An entry: its first line's words, then sub-entries, each shown on lines of its own under
#: it (the bottleneck's fix); on a page (``UNCUT``), one line joined by "; ".
Entry = tuple[str, ...]


def wrap(text: str, width: int = WIDTH, *, lead: str = "", indent: str = "") -> list[str]:
    """``text`` in lines of at most ``width`` characters, broken between words (a word
    longer than a line, a path say, has a line of its own and is never cut): the first line
    after ``lead``, the others after ``indent``. Every face's terminal lines wrap here."""
    return textwrap.wrap(" ".join(text.split()), width=width, initial_indent=lead,
                         subsequent_indent=indent, break_long_words=False,
                         break_on_hyphens=False) or [lead]


def wrap_entry(entry: Entry, width: int = WIDTH) -> list[str]:
    """``entry`` in lines of at most ``width`` characters (``wrap``): its first part from
    column 0, the rest indented by 2, each part's further lines by 2 more. ``UNCUT``: one
    line."""
    if width >= UNCUT:
        return ["; ".join(" ".join(part.split()) for part in entry)]
    lines: list[str] = []
    for n, part in enumerate(entry):
        lead = "" if n == 0 else "  "
        lines += wrap(part, width, lead=lead, indent=lead + "  ")
    return lines


def _family_evidence(finding_id: str) -> str | None:
    family = family_of(finding_id)
    return family.evidence if family else None


def _family_id(finding_id: str) -> str | None:
    family = family_of(finding_id)
    return family.base if family else None


def _headline(f: dict[str, Any]) -> str:
    """A finding's title, or (a report written before titles) its message."""
    return " ".join(str(f.get("title") or f.get("message") or "").split())


def _worst_first(found: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(found, key=lambda f: worst_first(f.get("status")))


def _findings(report: dict[str, Any]) -> list[dict[str, Any]]:
    return [f for f in report.get("findings", []) if isinstance(f, dict) and "id" in f]


def devices_line(report: dict[str, Any]) -> str | None:
    """Devices seen and used; for no GPU, that the work ran on the CPU and why (whole: the
    terminal wraps it)."""
    gpus = tf_gpus(report)
    if gpus is None and any(walk(report, "nvml_unavailable_reason")):
        return f"devices: NVML sees no GPU: {why_no_gpu(report)}"
    if gpus is None:
        summary = report.get("devices", {}).get("summary")
        return f"devices: {summary}" if summary else None
    if not gpus:
        return f"devices: no GPU, ran on the CPU{cpu_devices(report)}: {why_no_gpu(report)}"
    used = _worst_first([f for f in _findings(report)
                         if _family_evidence(f["id"]) in ("DeviceLanes", "GpuUse")])
    tail = f"; {_headline(used[0])}" if used else ""
    return f"devices: {len(gpus)} GPU(s) seen by TensorFlow{tail}"


def _ms(seconds: Any) -> str | None:
    """Milliseconds by gpudiag.layout.units' one rule, without the unit (None: no number)."""
    return ms_number(seconds) if isinstance(seconds, int | float) else None


#: What slowed the program that a measured step may not show, first first: a debugging
#: switch left on (every tf.function eager: its trace holds no complete step), a model
#: built for every fit (its tracing), Keras calls made one at a time.
UNSTEPPED_FAMILIES = ("run.debug-mode", "run.model-rebuilt", "run.keras-calls")


def _unstepped_entry(report: dict[str, Any]) -> Entry | None:
    """A debugging switch left on, or Keras calls that took the program's time (warn):
    the bottleneck where no step loop was measured, or where the one measured was not
    slow (a k-fold's fits: each fit's steps are fine, the tracing of each new model is
    the time)."""
    found = sorted((f for f in _findings(report) if f.get("status") == "warn"
                    and _family_id(f["id"]) in UNSTEPPED_FAMILIES),
                   key=lambda f: UNSTEPPED_FAMILIES.index(_family_id(f["id"])))
    if not found:
        return None
    fix = fix_entry(found[0])
    head = f"bottleneck: {_headline(found[0])}"
    return (head, fix) if fix else (head,)


def _waste(f: dict[str, Any]) -> float:
    """The share of its step a bottleneck finding's devices did not compute (-1: no step
    measured): of several at one status (explain over several traces, several processes),
    the one with the most to gain is the worst."""
    compute = (f.get("evidence", {}).get("shares") or {}).get("compute")
    return 1.0 - compute if isinstance(compute, int | float) else -1.0


def steady_loop(report: dict[str, Any], f: dict[str, Any]) -> dict[str, Any] | None:
    """The loop a bottleneck finding profiled, as run.throughput of the same process timed
    it (its steady median: the loop's step); None: not timed, or not told which."""
    suffix = f["id"][len(_family_id(f["id"]) or f["id"]):]  # one process's: ".p1"
    found = next((g for g in _findings(report) if g["id"] == f"run.throughput{suffix}"), {})
    return loop_of(str(f.get("message", "")), found.get("evidence", {}))


def _steady_step(loop: dict[str, Any] | None) -> str | None:
    """The profiled window's step named as the window's, beside the loop's step (its
    steady median with its interval): "a step of the profiled window; the loop's step:
    4.85 ms, 95 % CI 4.80-4.90, median of 101 steps"."""
    median = _ms(loop.get("step_s_median")) if loop else None
    if loop is None or median is None:
        return None
    low, high = _ms(loop.get("step_s_low")), _ms(loop.get("step_s_high"))
    ci = f", 95 % CI {low}-{high}" if low is not None and high is not None else ""
    steps = loop.get("timed_steps")
    over = f", median of {counted(steps, 'step')}" if isinstance(steps, int) else ""
    return f"a step of the profiled window; the loop's step: {median} ms{ci}{over}"


def bottleneck_entry(report: dict[str, Any]) -> Entry | None:
    """The worst bottleneck finding's named cause (its title), its share of the step, and
    the fix; a debugging switch left on, or Keras calls that took the program's time
    (models rebuilt, calls one at a time), where no step was measured or the measured one
    was fine."""
    found = sorted((f for f in _findings(report)
                    if _family_evidence(f["id"]) == "Bottleneck"
                    or _family_id(f["id"]) == "diff.bottleneck"),
                   key=lambda f: (worst_first(f.get("status")), -_waste(f)))
    if not found or found[0].get("status") in ("skip", "ok"):
        unstepped = _unstepped_entry(report)
        if unstepped is not None:
            return unstepped
    if not found:
        return None
    f = found[0]
    ev = f.get("evidence", {})
    if f["id"].startswith("diff."):  # gpudiag diff's: before and after, in its own words,
        text = f.get("title") or str(f.get("message", "")).split(": ", 1)[-1]  # and whether
        text = " ".join(text.split())  # the prediction held
        held = prediction_held(ev)
        if held:  # said whole, not twice
            text = re.sub(r"; prediction (held|missed)$", "", text) + f"; {held}"
        return (f"bottleneck: {text.removeprefix('bottleneck ')}",)
    if f.get("status") == "skip":
        return (f"bottleneck: not measured: {_headline(f)}",)
    causes = ev.get("causes") or []
    if ev.get("shared_cores"):  # virtual CPU devices: not the user's GPUs' bottleneck
        what = causes[0] if causes else "none stands out"
        return (f"bottleneck: {what}, of virtual CPUs sharing cores: not your GPUs",)
    loop = steady_loop(report, f)
    fix = fix_entry(f)
    if f.get("title"):
        steady = _steady_step(loop)
        head = f"bottleneck: {f['title']}" + (f" ({steady})" if steady else "")
        return (head, fix) if fix else (head,)
    shares = ev.get("shares") or {}
    step = _ms(ev.get("step_s"))
    per = f" of a {step} ms step" if step else ""
    if not causes:
        parts = ", ".join(f"{k} {v:.0%}" for k, v in shares.items()
                          if k != "host_between_calls" and isinstance(v, int | float)
                          and v >= 0.05)
        return (f"bottleneck: none stands out{per} ({parts})",)
    part = {"input-bound": "input", "communication-bound": "communication",
            "host-bound": "host_between_calls"}.get(causes[0])
    share = shares.get(part) if part else None
    said = f" ({share:.0%}{per})" if isinstance(share, int | float) else \
        f" ({per[1:]})" if per else ""
    head = f"bottleneck: {causes[0]}{said}"
    return (head, fix) if fix else (head,)


def bottleneck_line(report: dict[str, Any]) -> str | None:
    """The bottleneck's entry on one line (a page wraps it)."""
    entry = bottleneck_entry(report)
    return wrap_entry(entry, UNCUT)[0] if entry else None


def learning_line(report: dict[str, Any]) -> str | None:
    """The learning verdict, or, worse than it, why the loss cannot fit (run.loss-setup's
    mismatch at the program's line)."""
    found = _worst_first([f for f in _findings(report) if _family_id(f["id"]) in _LEARNING
                          or (_family_id(f["id"]) == "run.loss-setup"
                              and f.get("status") in ("fail", "warn"))])
    if not found:
        return None
    f = found[0]
    word = {"ok": "", "warn": "WARN ", "fail": "FAIL ", "skip": "not judged: "}.get(
        f.get("status", ""), "")
    return f"learning: {word}{_headline(f)}"


def try_line(report: dict[str, Any]) -> str | None:
    """`gpudiag try`'s answer (report.json's data.try.headline: gpudiag.verdicts.trial)."""
    said = (report.get("data", {}).get("try") or {}).get("headline")
    return said if isinstance(said, str) and said else None


def interpreter_line(report: dict[str, Any]) -> str | None:
    """A program that failed on ``import tensorflow`` (the catalogue's tensorflow-missing)
    run by a Python without it, while gpudiag's own Python has it: that interpreter and
    the two ways out, whole."""
    crashed = any(f["id"] == "run.crash" and f.get("evidence", {}).get("catalogue") ==
                  "tensorflow-missing" for f in _findings(report))
    run = report.get("data", {}).get("run") or {}
    ours = run.get("gpudiag_python") or {}
    argv = run.get("command") or []
    if not crashed or not ours.get("has_tensorflow") or not argv:
        return None
    theirs, exe = str(argv[0]), str(ours.get("executable"))
    return (f"fix: {theirs} has no TensorFlow; gpudiag's Python has it: run the program "
            f"with {exe}, or install TensorFlow into {theirs} ({theirs} -m pip install "
            f"tensorflow)")


def _crashes(report: dict[str, Any]) -> list[dict[str, Any]]:
    """The program's crashes (run.crash, failed), in the report's order."""
    return [f for f in _findings(report) if _family_id(f["id"]) == "run.crash"
            and f.get("status") == "fail"]


def crash_entry(report: dict[str, Any]) -> Entry | None:
    """The program's crash, first wherever it happened: what raised where ("crash:
    ValueError at train.py:12 (catalogue entry)") and its fix at the user's line."""
    crashes = _crashes(report)
    if not crashes:
        return None
    said = _headline(crashes[0])
    head = said if said.startswith("crash") else f"crash: {said}"
    if len(crashes) > 1:
        head += f" ({len(crashes) - 1} more crashed)"
    actions = [a for a in crashes[0].get("actions") or [] if isinstance(a, dict)
               and a.get("what")]
    fix = fix_entry(crashes[0]) if actions else None
    return (head, fix) if fix else (head,)


def counts_line(report: dict[str, Any]) -> str:
    findings = _findings(report)
    n = {s: sum(1 for f in findings if f.get("status") == s) for s in SUMMARY_ORDER}
    crashed = {id(f) for f in _crashes(report)}  # the crash named first: it is the cause
    failed = [f["id"] for f in sorted(findings, key=lambda f: id(f) not in crashed)
              if f.get("status") == "fail"]
    head = f"gpudiag {report.get('command', '?')}"
    if report.get("partial"):
        head += " (interrupted)" if report.get("interrupted") else " (partial)"
    more = f" and {len(failed) - 1} more" if len(failed) > 1 else ""
    first = f" ({failed[0]}{more})" if failed else ""
    return (f"{head}: {n['fail']} failed{first}, {counted(n['warn'], 'warning')}, "
            f"{n['skip']} not checked, {n['ok']} ok")


def entries(report: dict[str, Any], tail: Sequence[str] = ()) -> list[Entry]:
    """The verdict's entries (``tail``: lines that end it, the report's path), at most
    MAX_ENTRIES: the program's crash first, then `diff`'s or `try`'s result; the counts,
    the devices, the bottleneck with its fix, learning (`diff`: no devices entry).
    Past MAX_ENTRIES, the counts give way."""
    with indexed():
        return _entries(report, tail)


def _entries(report: dict[str, Any], tail: Sequence[str]) -> list[Entry]:
    result = diff_line(report) or try_line(report)
    first = [e for e in (crash_entry(report), (result,) if result else None) if e]
    body: list[str | Entry | None] = [
        counts_line(report), None if result else devices_line(report),
        bottleneck_entry(report), learning_line(report), interpreter_line(report)]
    out: list[Entry] = first + [(e,) if isinstance(e, str) else e for e in body if e]
    room = MAX_ENTRIES - len(tail)
    while len(out) > room and len(out) > 1:
        out.pop(min(len(first), len(out) - 1))
    return out + [(t,) for t in tail]


def verdict(report: dict[str, Any], width: int = WIDTH) -> list[str]:
    """The verdict's lines: the counts, devices, bottleneck and its fix, learning (`diff`:
    its result first), each line at most ``width`` characters, a long entry wrapped; a page
    (``UNCUT``) gets one line per entry."""
    return [ln for e in entries(report) for ln in wrap_entry(e, width)]


def terminal(report: dict[str, Any], report_md: str, logdir: str) -> list[str]:
    """What a command prints last: the verdict, where the report and the dashboard are;
    at most six entries, every line under 80 columns."""
    tail = (f"report: {report_md}", f"dashboard: gpudiag tensorboard {logdir}")
    return [ln for e in entries(report, tail) for ln in wrap_entry(e)]


def card(report: dict[str, Any]) -> str:
    """The Text tab's first card (markdown, one line per entry, the page wraps them): the
    verdict and the report."""
    tail = (f"report: {report.get('run_dir', '')}/report.md",)
    lines = [ln for e in entries(report, tail) for ln in wrap_entry(e, UNCUT)]
    return "  \n".join(md_text(ln) for ln in lines)
