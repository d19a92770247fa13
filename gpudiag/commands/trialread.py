"""A `gpudiag try` trial read back from its run directory (gpudiag.commands.tryfixes runs
it): its steady step, exit code, crash or hang, whether the fix was made at the line (the
hooks' record of the calls), and its losses by training step. TF-free."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.fixes import BY_NAME, Chosen
from gpudiag.fixes.lines import Call
from gpudiag.layout import eventdecode, events, loopevents
from gpudiag.verdicts import trial as verdicts


def command_evidence(report: dict[str, Any]) -> dict[str, Any]:
    """A `gpudiag run` report's run.command evidence (exit code, duration, time limit)."""
    found: dict[str, Any] = next(
        (f for f in report.get("findings", []) if f.get("id") == "run.command"), {})
    return found.get("evidence") or {}


def returncode_of(report: dict[str, Any]) -> int | None:
    code = command_evidence(report).get("returncode")
    return code if isinstance(code, int) and code >= 0 else None


def read_trial(run_dir: Path, fix: str, round_no: int, chosen: Chosen | None,
               with_losses: bool = False) -> verdicts.Trial:
    """One trial's record from its run directory's report and events (``with_losses``:
    its first loop's loss by training step too)."""
    import json

    report = json.loads((run_dir / layout.REPORT_JSON).read_text())
    found = {f.get("id"): f for f in report.get("findings", [])}
    loops = (found.get("run.throughput", {}).get("evidence") or {}).get("loops") or []
    step = loops[0].get("step_s_median") if loops else None
    crash = found.get("run.crash", {})
    limited = command_evidence(report).get("time_limited_s")
    applied = None
    if chosen is not None:
        made = BY_NAME[chosen.fix.name].made(chosen.fix, recorded_calls(run_dir))
        applied = None if made is None else bool(made)
    return verdicts.Trial(fix, round_no, step if isinstance(step, int | float) else None,
                          returncode_of(report),
                          _hung(limited) if limited is not None else _crash_of(crash),
                          str(run_dir), applied,
                          int(loops[0].get("timed_steps") or 0) if loops else 0,
                          trial_losses(run_dir) if with_losses else {})


def _hung(limit_s: float) -> str:
    return (f"it did not end within {limit_s:g} s (a hang: the program as written ended), "
            "so gpudiag ended it")


def _crash_of(found: dict[str, Any]) -> str | None:
    """A trial's exception in a line: run.crash's title and its message's first line
    (XLA's words say a step it could not compile: gpudiag.fixes.jit_compile)."""
    if found.get("status") != "fail":
        return None
    said = str(found.get("title") or "")
    message = str((found.get("evidence") or {}).get("message") or "").strip()
    return f"{said}: {message.splitlines()[0][:200]}" if message else said


def trial_losses(run_dir: Path) -> dict[int, float]:
    """The loss by training step of a trial's first loop (empty: none recorded, or the run
    directory cannot be read as a run)."""
    from gpudiag.errors import GpudiagError
    from gpudiag.rundir import load_run
    from gpudiag.rundir.loops import read_loops

    try:
        loops = read_loops(load_run(run_dir))
    except (GpudiagError, OSError):
        return {}
    return next(iter(loops.values())).losses() if loops else {}


def recorded_calls(run_dir: Path) -> list[Call]:
    """The tf.data and compile calls the hooks recorded at the program's lines, in the
    order made (every process's events file)."""
    out: list[tuple[int, int, Call]] = []
    program = layout.child_path(run_dir, layout.RUN_CHILD_NAME)
    for path in sorted(program.glob(f"{layout.RUN_EVENTS_PREFIX}*{layout.RUN_EVENTS_SUFFIX}")):
        with path.open("rb") as f:
            for line in f:
                rec = eventdecode.decode_line(line)
                if rec is None:
                    continue
                call = _call_of(rec.event)
                if call is not None:
                    out.append((rec.pid, rec.seq, call))
    return [c for _, _, c in sorted(out, key=lambda x: (x[0], x[1]))]


def _call_of(event: Any) -> Call | None:
    caller = getattr(event, "caller", None) or {}
    file, line = caller.get("file"), caller.get("line")
    if not isinstance(file, str) or not isinstance(line, int):
        return None
    base = file.rsplit("/", 1)[-1]
    code = str(caller.get("code") or "")
    if isinstance(event, events.DatasetCall):
        return Call(event.method, base, line, code, dict(event.args), event.input,
                    event.output)
    if isinstance(event, loopevents.Compile):
        return Call("compile", base, line, code,
                    {"steps_per_execution": event.steps_per_execution,
                     "jit_compile": event.jit_compile})
    return None
