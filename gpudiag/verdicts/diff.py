"""`gpudiag diff A B`: did the change work, and what is the bottleneck now. Pure.

Two ``Side``s in (each run's step series, bottleneck breakdowns, findings, devices,
scaling efficiencies, plain data read by gpudiag.rundir), a DiffRecord (gpudiag.layout.
diff) and findings out:

- ``diff.step-time.<loop>`` (diff_steptime.py): each side's median step with its CI_LEVEL
  interval (per training step: a Keras fit with steps_per_execution=N has each call's time
  over N, and its profiled step, one call, is divided by N too), B / A with its interval.
- ``diff.bottleneck.<finding>`` (diff_bottleneck.py): each device's step parts before and
  after, the bottleneck fixed / moved / still there; A's prediction for its fix beside B's
  measured step ("predicted X ms (...), measured Y ms (+Z %)").
- ``diff.learning`` (diff_learning.py): the loss at the steps both sides recorded.
- ``diff.devices``, ``diff.findings`` (appeared / went away), ``diff.scaling``
  (efficiency per device count), ``diff.not-compared`` (what could not be, and why).
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

from gpudiag.layout.diff import DiffRecord, ScalingDiff
from gpudiag.report import Finding
from gpudiag.rundir.records import Loop, StepBreakdown
from gpudiag.verdicts.common import title
from gpudiag.verdicts.diff_bottleneck import (
    bottleneck_diff,
    bottleneck_finding,
    hold_to_prediction,
    per_step,
)
from gpudiag.verdicts.diff_learning import learning_against_noise
from gpudiag.verdicts.diff_steptime import loop_diff, steady_times, step_finding


@dataclass(frozen=True)
class Side:
    path: str
    command: str
    loops: dict[str, Loop]
    breakdowns: tuple[StepBreakdown, ...]
    findings: dict[str, str]  # id -> status
    devices: list[str] = field(default_factory=list)
    efficiency: dict[tuple[str, int], float] = field(default_factory=dict)
    # per loop, the steady-state rule's inputs the run recorded (run.throughput: its
    # warm-up steps and the profiled steps it left out)
    steady: dict[str, tuple[int, tuple[int, ...]]] = field(default_factory=dict)
    status: str = "complete"  # gpudiag.rundir's: complete, running, interrupted, failed
    real_path: str = ""  # the directory resolved (A and B one directory: the same)
    # whether the program set TensorFlow's global seed (run.devices' seed_calls); None:
    # not recorded (a run before gpudiag watched it, or not a `run`)
    seeded: bool | None = None
    seeds: tuple[str, ...] = ()  # the calls that set it, with their seed: tf.random.set_seed(3)


def caveats(a: Side, b: Side) -> list[str]:
    """What the diff's verdict must carry: a side still running (or not complete), step
    times dropped as impossible (how many), A and B one directory."""
    out = []
    if a.real_path and a.real_path == b.real_path:
        out.append(f"A and B are one directory ({a.path}): a run compared with itself")
    for name, side in (("A", a), ("B", b)):
        if side.status == "running":
            out.append(f"{name} is still running: compared as it was when read, not as "
                       "it will end")
        elif side.status != "complete":
            out.append(f"{name} is {side.status}: compared on what it recorded")
        for loop in side.loops.values():
            if (n := loop.impossible()):
                out.append(f"{name} {loop.name}: {n} of {len(loop.steps)} step times dropped "
                           "as impossible (negative, zero, not finite or above a million s)")
    return out


def pair_loops(a: Side, b: Side) -> tuple[list[tuple[Loop, Loop]], list[str]]:
    """Loops of the same name; one loop each with different names is compared too."""
    common = [n for n in a.loops if n in b.loops]
    pairs = [(a.loops[n], b.loops[n]) for n in common]
    left = [n for n in a.loops if n not in common]
    right = [n for n in b.loops if n not in common]
    if not pairs and len(left) == 1 and len(right) == 1:
        return [(a.loops[left[0]], b.loops[right[0]])], []
    said = [f"loop {n} only in A" for n in left] + [f"loop {n} only in B" for n in right]
    return pairs, said


def pair_breakdowns(a: Side, b: Side) -> list[tuple[StepBreakdown, StepBreakdown]]:
    by_id = {x.finding_id: x for x in b.breakdowns if x.step_s}
    pairs = [(x, by_id[x.finding_id]) for x in a.breakdowns if x.finding_id in by_id and x.step_s]
    if not pairs:
        left = [x for x in a.breakdowns if x.step_s]
        if len(left) == 1 and len(by_id) == 1:
            pairs = [(left[0], next(iter(by_id.values())))]
    return pairs


def findings_changes(a: Mapping[str, str], b: Mapping[str, str]) -> tuple[list[str], list[str]]:
    bad = ("warn", "fail")
    appeared = [f"{i}: {s}" for i, s in b.items() if s in bad and a.get(i) not in bad]
    gone = [f"{i}: {s}" for i, s in a.items() if s in bad and b.get(i) not in bad]
    return appeared, gone


def scaling_diffs(a: Side, b: Side) -> list[ScalingDiff]:
    keys = sorted(set(a.efficiency) | set(b.efficiency))
    return [ScalingDiff(s, n, a.efficiency.get((s, n)), b.efficiency.get((s, n)))
            for s, n in keys]


def _medians(side: Side) -> dict[str, float]:
    """Each loop's steady median, by the rule its run recorded: the same median its loop's
    comparison gives (loop_diff), so that B is held to its prediction by its one step."""
    return {n: statistics.median(t) for n, loop in side.loops.items()
            if (t := steady_times(loop, side.steady.get(n)))}


def _other_findings(rec: DiffRecord, a: Side, b: Side) -> list[Finding]:
    out = []
    da, db = sorted(a.devices), sorted(b.devices)
    out.append(Finding("diff.devices", "ok" if da == db else "warn",
                       f"devices used: {', '.join(da) or 'none seen'}" if da == db else
                       f"devices used: A {', '.join(da) or 'none seen'}; B "
                       f"{', '.join(db) or 'none seen'}", {"a": da, "b": db},
                       title=title(f"the same devices used: {', '.join(da) or 'none seen'}",
                                   f"the same {len(da)} device(s) used") if da == db else
                       title(f"devices differ: A {', '.join(da) or 'none'}; B "
                             f"{', '.join(db) or 'none'}", f"devices differ: A {len(da)}, "
                             f"B {len(db)}")))
    text = "; ".join(([f"appeared in B: {', '.join(rec.findings_appeared)}"]
                      if rec.findings_appeared else []) +
                     ([f"went away: {', '.join(rec.findings_gone)}"]
                      if rec.findings_gone else [])) or "the same findings warn or fail"
    out.append(Finding("diff.findings", "warn" if rec.findings_appeared else "ok", text,
                       {"appeared": rec.findings_appeared, "gone": rec.findings_gone},
                       title=(f"{len(rec.findings_appeared)} warning(s) appeared in B, "
                              f"{len(rec.findings_gone)} went away"
                              if rec.findings_appeared or rec.findings_gone else
                              "the same findings warn or fail")))
    if rec.scaling:
        rows = [f"{s.strategy} {s.n_devices} devices "
                f"{'?' if s.efficiency_a is None else f'{s.efficiency_a:.2f}'} -> "
                f"{'?' if s.efficiency_b is None else f'{s.efficiency_b:.2f}'}"
                for s in rec.scaling]
        out.append(Finding("diff.scaling", "ok", "scaling efficiency: " + "; ".join(rows),
                           {"configs": [asdict(s) for s in rec.scaling]},
                           title=title("scaling efficiency: " + "; ".join(rows),
                                       f"scaling efficiency of {len(rows)} configuration(s)")))
    if rec.not_compared:
        out.append(Finding("diff.not-compared", "skip", "not compared: " +
                           "; ".join(rec.not_compared), {"reasons": rec.not_compared},
                           title=title("not compared: " + "; ".join(rec.not_compared),
                                       f"{len(rec.not_compared)} thing(s) not compared")))
    return out


def judge(a: Side, b: Side) -> tuple[DiffRecord, list[Finding]]:
    """The diff of run A against run B: the record for report.json and the findings."""
    pairs, said = pair_loops(a, b)
    loops = [d for x, y in pairs
             if (d := loop_diff(x, y, a.steady.get(x.name), b.steady.get(y.name))) is not None]
    said += [f"loop {x.name}: no step times on one side" for x, y in pairs
             if loop_diff(x, y, a.steady.get(x.name), b.steady.get(y.name)) is None]
    ma, mb = _medians(a), _medians(b)
    necks = []
    for x, y in pair_breakdowns(a, b):
        loop_a = next((n for n in ma if y.finding_id.endswith(n) or len(ma) == 1), None)
        loop_b = next((n for n in mb if y.finding_id.endswith(n) or len(mb) == 1), None)
        x, y = (per_step(x, side.loops[n].steps_per_call if n in side.loops else 1)
                for x, side, n in ((x, a, loop_a or ""), (y, b, loop_b or "")))
        necks.append(hold_to_prediction(
            bottleneck_diff(x, y, ma.get(loop_a or ""), mb.get(loop_b or "")), x, y,
            ma.get(loop_a or "")))
    if not necks and (a.breakdowns or b.breakdowns):
        said.append("bottleneck: no profiled step breakdown on both sides")
    if a.command != b.command:
        said.append(f"A is a `{a.command}` run, B a `{b.command}` run: compared where both "
                    "have the same kind of data")
    appeared, gone = findings_changes(a.findings, b.findings)
    rec = DiffRecord(a.path, b.path, a.command, b.command, loops, necks, scaling_diffs(a, b),
                     sorted(a.devices), sorted(b.devices), appeared, gone, said)
    found = [step_finding(d) for d in loops] + [bottleneck_finding(d) for d in necks] + [
        learning_against_noise(pairs, loops, (a.seeded, b.seeded), (a.seeds, b.seeds)),
        *_other_findings(rec, a, b)]
    if said_too := caveats(a, b):
        found.insert(0, Finding("diff.caveats", "warn", "; ".join(said_too),
                                {"caveats": said_too},
                                title=title(f"diff with caveats: {said_too[0]}",
                                            "diff with caveats: " + re.sub(
                                                r" \([^)]*\)", "", said_too[0]),
                                            f"diff with {len(said_too)} caveat(s): see the "
                                            "message")))
    return rec, found
