"""`gpudiag diff A B`: two runs compared: did the change work, and what is the bottleneck now.

A and B are run directories (of `run`, `scaling`, `explain`: read with
gpudiag.rundir.load_run), or directories (or files) holding profiler traces: those are
explained first, by the code `gpudiag explain` runs, into an explain run directory of
their own under the logdir, and that run is compared. A path that is neither, or a run
with neither a step series nor a profiled step breakdown, is one line and exit 2
(RunDirError), before the diff's own run directory is made. The judging is pure
(gpudiag.verdicts.diff); the record goes to report.json's ``data.diff``
(gpudiag.layout.diff), a table to TensorBoard (TAG_DIFF).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.markdown import markdown_table
from gpudiag.rundir import Run, RunDirError, load_run
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import diff as verdict


def resolve(path: Path, logdir: Path, ui: Ui) -> Run:
    """The run ``path`` names; traces are explained first (module docstring)."""
    if (path / layout.REPORT_JSON).is_file():
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
        with RunSession("explain", logdir) as session:
            explain.run(session, path, ui=ui)
        run = load_run(session.run_dir)
    if not run.loops and not any(b.step_s for b in run.breakdown):
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
        if not f.id.startswith("scaling.efficiency."):
            continue
        strategy = f.id.rsplit(".", 1)[-1]
        for row in f.evidence.get("per_device_count") or []:
            if row.get("efficiency") is not None:
                out[(strategy, int(row["n_devices"]))] = float(row["efficiency"])
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
    return verdict.Side(str(run.path), run.command, dict(run.loops), run.breakdown,
                        {f.id: f.status for f in run.report.findings}, _devices(run),
                        _efficiency(run), *_seeded(run))


def _seeded(run: Run) -> tuple[bool | None, tuple[str, ...]]:
    """verdict.Side's ``seeded`` and ``seeds`` (each call's seed, its line left out)."""
    calls = _seeds(run)
    if calls is None:
        return None, ()
    return bool(calls), tuple(c.split(" at ", 1)[0] for c in calls)


def _table(rec: Any) -> str:
    rows = [[d.name_b, f"{d.a.median_s * 1e3:.3f}", f"{d.b.median_s * 1e3:.3f}",
             f"{d.ratio:.3f}", "" if d.ratio_low is None else
             f"{d.ratio_low:.3f}-{d.ratio_high:.3f}", d.verdict] for d in rec.loops]
    return markdown_table(["loop", "A ms", "B ms", "B/A", "95 % CI", "verdict"], rows)


def run(session: RunSession, a: Run, b: Run) -> None:
    record, findings = verdict.judge(side(a), side(b))
    for f in findings:
        session.add(f)
    session.set(layout.DIFF_DATA_KEY, record.to_dict())
    session.text(layout.TAG_DIFF, _table(record))
