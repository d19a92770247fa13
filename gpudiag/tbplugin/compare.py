"""Two runs side by side on the GPUDIAG dashboard: what `gpudiag diff` found.

The numbers come from `gpudiag diff`'s own record (its run's report.json, ``data.diff``,
read through gpudiag.rundir like every run): the dashboard finds the diff run in the logdir
whose command line names both runs, and shows each compared figure as a row (the first
run's value, the second's, the change). It computes no difference of its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from gpudiag.rundir import Run, list_runs
from gpudiag.tbplugin.views import run_id

#: The key pairs a diff record holds a compared figure under, and its change's keys.
_PAIRS = (("a", "b"), ("before", "after"), ("old", "new"))
_CHANGE = ("change", "delta", "ratio", "change_percent", "verdict")


def _names(run: Run) -> set[str]:
    return {run.path.name, str(run.path), str(run.path.resolve())}


def find_diff(a: Run, b: Run, logdir: Path) -> Run | None:
    """The newest `gpudiag diff` run of this logdir whose command line names both runs."""
    for run in list_runs(logdir):
        if run.command != "diff" or not isinstance(run.report.data.get("diff"), dict):
            continue
        argv = [arg.rstrip("/") for arg in run.report.argv]
        named = [any(arg.endswith(n) or arg == n for arg in argv for n in _names(r))
                 for r in (a, b)]
        if all(named):
            return run
    return None


def _text(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return ", ".join(_text(v) for v in value) or "none"
    return "n/a" if value is None else str(value)


def rows(record: Any, path: str = "") -> Iterator[dict[str, str]]:
    """Every compared figure of the diff record: a dict holding a pair of values."""
    if isinstance(record, dict):
        pair = next((p for p in _PAIRS if p[0] in record and p[1] in record), None)
        if pair is not None:
            change = next((record[k] for k in _CHANGE if k in record), None)
            yield {"what": path or "value", "a": _text(record[pair[0]]),
                   "b": _text(record[pair[1]]), "change": _text(change) if change is not None
                   else ""}
            return
        for key, value in record.items():
            yield from rows(value, f"{path}.{key}" if path else str(key))
    elif isinstance(record, list):
        for i, value in enumerate(record):
            yield from rows(value, f"{path}[{i}]")


def diff_view(a: Run, b: Run, logdir: Path) -> dict[str, Any]:
    """The side-by-side view, or an error naming the command that makes its data."""
    ida, idb = run_id(a, logdir), run_id(b, logdir)
    found = find_diff(a, b, logdir)
    if found is None:
        return {"a": ida, "b": idb, "error": (
            f"no `gpudiag diff` of these two runs in this logdir yet: "
            f"gpudiag diff {a.path} {b.path} --logdir {logdir}")}
    record = found.report.data["diff"]
    lines = [str(x) for x in record.get("lines") or record.get("summary_lines") or []
             if isinstance(x, str)]
    return {"a": ida, "b": idb, "source": f"from {run_id(found, logdir)} (gpudiag diff)",
            "rows": list(rows({k: v for k, v in record.items()
                               if k not in ("lines", "summary_lines")})),
            "lines": lines}
