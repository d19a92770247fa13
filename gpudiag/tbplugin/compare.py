"""Two runs side by side on the GPUDIAG dashboard: what `gpudiag diff` found.

The numbers come from `gpudiag diff`'s own record (gpudiag.layout.diff.DiffRecord): the
record of a diff run of the same two runs in the logdir (its report.json's ``data.diff``,
read through gpudiag.rundir), else the record `gpudiag diff`'s own code makes (commands.
diff.side, verdicts.diff.judge). Each compared figure is a row: run A's value, run B's,
the change, said in words the right way round (gpudiag.verdicts.compared.change: "2.66x
faster (95 % CI 2.59-2.73)", never a ratio below 1 called faster). ``result`` is the
diff's answer in one line per loop, then whether A's prediction for the fix held (B's
median step inside its interval), shown above the two runs' cards. Two runs chosen on the
page are compared in time order: A the one that started first, B the later, whichever
selector named which. The dashboard computes no difference of its own.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from gpudiag.layout.diff import DIFF_DATA_KEY, BottleneckDiff, DiffRecord
from gpudiag.rundir import Run, list_runs
from gpudiag.tbplugin.ids import run_id
from gpudiag.verdicts.compared import change, loop_result, prediction_held


def _ms(x: float | None) -> str:
    return "n/a" if x is None else f"{x * 1e3:.3f} ms"


def find_diff(a: Run, b: Run, logdir: Path) -> Run | None:
    """The newest `gpudiag diff` run of this logdir that compared these two runs (whose
    record reads: another diff record that does not is passed over)."""
    want = (str(a.path.resolve()), str(b.path.resolve()))
    for run in list_runs(logdir):
        record = run.report.data.get(DIFF_DATA_KEY)
        if run.command != "diff" or not isinstance(record, dict) or \
                not all(isinstance(record.get(k), str) for k in ("a", "b")):
            continue  # a record of another shape: not this pair's, never an error
        try:
            compared = tuple(str(Path(record[k]).resolve()) for k in ("a", "b"))
            if compared == want:
                DiffRecord.from_dict(record)
                return run
        except (OSError, RuntimeError, ValueError, KeyError, TypeError, AttributeError):
            continue
    return None


def rows(record: DiffRecord) -> list[dict[str, str]]:
    """The compared figures: per loop the median step with its interval, throughput;
    per bottleneck finding the cause before and after and each part per device; the
    findings that appeared or went away."""
    out: list[dict[str, str]] = []
    for d in record.loops:
        out.append({"what": f"{d.name_b}: median step", "a": _ms(d.a.median_s),
                    "b": _ms(d.b.median_s),
                    "change": change(d.ratio, d.ratio_low, d.ratio_high, d.verdict)})
        if d.examples_per_s_a is not None or d.examples_per_s_b is not None:
            out.append({"what": f"{d.name_b}: examples/s",
                        "a": f"{d.examples_per_s_a or 0:,.0f}",
                        "b": f"{d.examples_per_s_b or 0:,.0f}", "change": ""})
    for n in record.bottlenecks:
        out.append({"what": f"{n.finding_b}: bottleneck", "a": n.before or "none",
                    "b": n.after or "none", "change": n.outcome})
        out.append({"what": f"{n.finding_b}: the profiled window's step",
                    "a": _ms(n.step_a_s), "b": _ms(n.step_b_s), "change": ""})
        if n.predicted_step_s is not None and n.measured_step_s is not None:
            out.append({"what": f"{n.finding_b}: median step, predicted for B",
                        "a": _ms(n.predicted_step_s), "b": _ms(n.measured_step_s),
                        "change": _held(n)})
        out += [{"what": f"{p.device} {p.part}", "a": _ms(p.a_s), "b": _ms(p.b_s),
                 "change": "changed most" if n.changed_most == f"{p.device} {p.part}"
                 else ""} for p in n.parts]
    out += [{"what": "finding appeared", "a": "", "b": f, "change": "new"}
            for f in record.findings_appeared]
    out += [{"what": "finding went away", "a": f, "b": "", "change": "gone"}
            for f in record.findings_gone]
    return out


def result(record: DiffRecord) -> list[str]:
    """The diff's answer, one line per compared loop ("B is 2.66x faster (95 % CI
    2.59-2.73): 27.0 -> 10.2 ms a step"; the loop named when there are several), or
    why nothing was compared."""
    lines = [loop_result(d.ratio, d.ratio_low, d.ratio_high, d.verdict, d.a.median_s,
                         d.b.median_s) for d in record.loops]
    if len(lines) > 1:
        lines = [f"{d.name_b}: {ln}" for d, ln in zip(record.loops, lines, strict=True)]
    lines = lines or ["no step time compared: " + ("; ".join(record.not_compared)
                                                   or "neither run timed its steps")]
    return lines + [said for n in record.bottlenecks
                    if (said := prediction_held(dataclasses.asdict(n))) is not None]


def _held(n: BottleneckDiff) -> str:
    return "held" if n.inside else "did not hold" if n.inside is False else \
        "no interval to hold B to"


def _side_id(path: str, logdir: Path) -> str:
    """A compared run's id on the page (its directory relative to the logdir), or its path
    as the diff recorded it when it is not under the logdir."""
    try:
        return Path(path).resolve().relative_to(logdir.resolve()).as_posix()
    except (ValueError, OSError):
        return path


def record_view(run: Run, logdir: Path) -> dict[str, Any] | None:
    """A `gpudiag diff` run's own record, as ``diff_view`` gives it (None: not a diff run,
    or no record in it): what the page shows when such a run is opened."""
    data = run.report.data.get(DIFF_DATA_KEY)
    if run.command != "diff" or not isinstance(data, dict):
        return None
    record = DiffRecord.from_dict(data)
    return {"a": _side_id(record.a, logdir), "b": _side_id(record.b, logdir),
            "source": f"from {run_id(run, logdir)} (gpudiag diff)", "result": result(record),
            "rows": rows(record), "lines": record.not_compared}


def in_time_order(a: Run, b: Run) -> tuple[Run, Run]:
    """The two runs, the one that started first as A (same start: as given)."""
    return (b, a) if (b.started_at or "") < (a.started_at or "") else (a, b)


def diff_view(a: Run, b: Run, logdir: Path) -> dict[str, Any]:
    """The side-by-side view, older to newer (``in_time_order``): the record of a `gpudiag
    diff` run of these two runs in the logdir, else the same record made by the code
    `gpudiag diff` runs (pure)."""
    a, b = in_time_order(a, b)
    found = find_diff(a, b, logdir)
    if found is not None:
        record = DiffRecord.from_dict(found.report.data[DIFF_DATA_KEY])
        source = f"from {run_id(found, logdir)} (gpudiag diff)"
    else:
        from gpudiag.commands.diff import side
        from gpudiag.verdicts.diff import judge

        record, _ = judge(side(a), side(b))
        source = "as `gpudiag diff` judges them (no diff run of these two in this logdir)"
    return {"a": run_id(a, logdir), "b": run_id(b, logdir), "source": source,
            "result": result(record), "rows": rows(record), "lines": record.not_compared}
