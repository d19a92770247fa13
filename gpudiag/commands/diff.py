"""`gpudiag diff A B`: two runs compared: did the change work, and what is the bottleneck now.

A and B are run directories (of `run`, `scaling`, `explain`: read with
gpudiag.rundir.load_run), or directories (or files) holding profiler traces: those are
explained first, by the code `gpudiag explain` runs, into an explain run directory of
their own under the logdir (in memory with no logdir: the library's ``gpudiag.diff``),
and that run is compared. A path that is neither, or a run
with neither a step series nor a profiled step breakdown, is one line and exit 2
(RunDirError), before the diff's own run directory is made. The judging is pure
(gpudiag.verdicts.diff); the record goes to report.json's ``data.diff``
(gpudiag.layout.diff), a table to TensorBoard (TAG_DIFF). ``compared(a, b, logdir)``: the
same as a typed Run, written under ``logdir`` or kept in memory (the library's
``gpudiag.diff``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.files import readable
from gpudiag.layout.compared import Scaling
from gpudiag.layout.units import ms_number
from gpudiag.markdown import markdown_table
from gpudiag.rundir import Run, RunDirError, load_run
from gpudiag.rundir.unsaved import unsaved_run
from gpudiag.session import MemorySession, RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import diff as verdict
from gpudiag.verdicts.diff_steptime import CI

#: what reading a run's content for the judging raises on a value of another type than
#: gpudiag writes (load_run validates the report's shape, not every evidence value)
_UNREADABLE = (ArithmeticError, AttributeError, KeyError, TypeError, ValueError, OSError,
               RuntimeError)


def resolve(path: Path, logdir: Path | None, ui: Ui, *, within: Path | None = None,
            argv: list[str] | None = None) -> Run:
    """The run ``path`` names; traces are explained first (module docstring), into a run
    directory under ``logdir`` (None: in memory), reading nothing outside ``within`` when
    given (gpudiag.commands.explain.run), its report's ``argv`` that one (RunSession)."""
    try:
        held = os.path.lexists(path / layout.REPORT_JSON)  # a FIFO too: load_run refuses it
    except ValueError as exc:  # a NUL byte
        raise RunDirError(f"{readable(str(path))[:160]}: not a path ({exc})") from None
    if held:
        run = load_run(path)
    else:
        from gpudiag.commands import explain
        from gpudiag.errors import UsageError

        try:
            explain.find_traces(path)
        except UsageError:
            raise RunDirError(f"not a gpudiag run directory: {path} (no "
                              f"{layout.REPORT_JSON}, and no profiler trace under it)"
                              ) from None
        ui.say(f"{path}: no {layout.REPORT_JSON}; explaining its traces first")
        run = explain.explained(path, logdir, ui, within=within, argv=argv)
    try:
        empty = not run.loops and not any(b.step_s for b in run.breakdown)
    except _UNREADABLE as exc:
        raise RunDirError(f"{readable(str(path))}: its step series cannot be read "
                          f"({type(exc).__name__}: {str(exc)[:120]})") from None
    if empty:
        raise RunDirError(f"{path}: a `{run.command}` run without a step series or a "
                          "profiled step to compare")
    return run


def _devices(run: Run) -> list[str]:
    data = run.report.data
    found: set[str] = set()
    for p in (data.get("run") or {}).get("tensorflow_processes") or []:
        found |= set(p.get("ops_by_device") or {})
    for c in ((data.get("scaling") or {}).get("configs") or {}).values():
        found |= set(c.get("devices") or [])
    for b in run.breakdown:
        found |= set(b.devices)
    return sorted(d for d in found if d.startswith("/"))


def _efficiency(run: Run) -> dict[tuple[str, int], float]:
    out: dict[tuple[str, int], float] = {}
    for f in run.report.findings:
        scaling = run.evidence(f)
        if not isinstance(scaling, Scaling):
            continue
        strategy = f.id.rsplit(".", 1)[-1]
        for row in scaling.per_device_count:
            if row.efficiency is not None:
                out[(strategy, row.n_devices)] = row.efficiency
    return out


def steady_rules(run: Run) -> dict[str, tuple[int, tuple[int, ...]]]:
    """Per loop, the warm-up and the profiled steps run.throughput left out (the steady
    state rule's inputs), by the loop's name as gpudiag.rundir gives it."""
    out: dict[str, tuple[int, tuple[int, ...]]] = {}
    for f in run.report.findings:
        if f.id.split(".")[:2] != ["run", "throughput"]:
            continue
        for row in f.evidence.get("loops") or []:
            warmup = row.get("warmup_steps") if isinstance(row, dict) else None
            if isinstance(warmup, int):
                rule = (warmup, tuple(int(i) for i in row.get("left_out_steps") or ()))
                for name in run.loops:
                    if name == row["series"] or name.startswith(f"{row['series']} ["):
                        out[name] = rule
    return out


def _seeds(run: Run) -> list[str] | None:
    """The calls that set TensorFlow's global seed, from run.devices' seed_calls (every
    process's, ``tf.random.set_seed(3) at train.py:4``); None where no such record exists
    (not a `run`, or one before it was kept)."""
    calls = [f.evidence["seed_calls"] for f in run.report.findings
             if (f.id == "run.devices" or f.id.startswith("run.devices."))
             and isinstance(f.evidence.get("seed_calls"), list)]
    return None if not calls else [str(c) for each in calls for c in each]


def side(run: Run) -> verdict.Side:
    """What the judging reads of ``run``; RunDirError (one line) when the run's content
    cannot be read for it (a value of another type than gpudiag writes)."""
    try:
        seeded, seeds = _seeded(run)
        return verdict.Side(str(run.path), run.command, dict(run.loops), run.breakdown,
                            {f.id: f.status for f in run.report.findings}, _devices(run),
                            _efficiency(run), steady=steady_rules(run), status=run.status,
                            real_path=str(run.path.resolve()), seeded=seeded, seeds=seeds)
    except _UNREADABLE as exc:
        raise RunDirError(f"{readable(str(run.path))}: cannot be compared: its report holds "
                          f"a value of another type ({type(exc).__name__}: "
                          f"{str(exc)[:120]})") from None


def judged(a: Run, b: Run) -> tuple[Any, list[Any]]:
    """verdict.judge of the two runs' sides (a RunDirError before anything is written,
    when a side cannot be read)."""
    sa, sb = side(a), side(b)
    try:
        return verdict.judge(sa, sb)
    except (ArithmeticError, TypeError, ValueError) as exc:
        raise RunDirError(f"{readable(str(a.path))} and {readable(str(b.path))}: cannot be "
                          f"compared ({type(exc).__name__}: {str(exc)[:120]})") from None


def _seeded(run: Run) -> tuple[bool | None, tuple[str, ...]]:
    """verdict.Side's ``seeded`` and ``seeds`` (each call's seed, its line left out)."""
    calls = _seeds(run)
    if calls is None:
        return None, ()
    return bool(calls), tuple(c.split(" at ", 1)[0] for c in calls)


def _table(rec: Any) -> str:
    rows = [[d.name_b, ms_number(d.a.median_s), ms_number(d.b.median_s),
             f"{d.ratio:.2f}", "" if d.ratio_low is None else
             f"{d.ratio_low:.2f}-{d.ratio_high:.2f}", d.verdict] for d in rec.loops]
    return markdown_table(["loop", "A ms", "B ms", "B/A", CI, "verdict"], rows)


def run(session: RunSession, judgement: tuple[Any, list[Any]]) -> None:
    """Write the judged diff (:func:`judged`, made before the run directory)."""
    record, findings = judgement
    for f in findings:
        session.add(f)
    session.set(layout.DIFF_DATA_KEY, record.to_dict())
    session.text(layout.TAG_DIFF, _table(record))


def compared(a: Run, b: Run, logdir: Path | None, *, argv: list[str] | None = None) -> Run:
    """Run A against run B (``run``) as a Run: a run directory under ``logdir``, read back
    with load_run, or, with no logdir, in memory (nothing written; the Run's path is B's).
    ``argv``: the report's (RunSession). Judged before anything is written: a side that
    cannot be read is a RunDirError and leaves no run directory."""
    judgement = judged(a, b)
    if logdir is None:
        memory = MemorySession("diff", b.path, argv=argv)
        with memory:
            run(memory, judgement)
        return unsaved_run(memory.report, b.path)
    with RunSession("diff", logdir, argv=argv) as session:
        run(session, judgement)
    return load_run(session.run_dir)
