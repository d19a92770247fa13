"""The verdict of `gpudiag run` on the program's crash (run.crash): the exception the
hooks saw (or the traceback the program printed on its stderr, or faulthandler's stack
of a fatal signal), the line of its message or of TensorFlow's log that says why
(gpudiag.verdicts.run.crash_match), the frame in the user's code, the catalogue's fix.

Pure functions of gpudiag.records.run and plain values, like gpudiag.verdicts.run.process.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import crash_match, tracebacks


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def crash(obs: Sequence[ProcessObservation], returncode: int | None,
          interrupted: bool = False, log_lines: Sequence[str] = ()) -> Finding:
    """The program's crash: exception, the line of its message (or of TensorFlow's log,
    ``log_lines``) that says why (gpudiag.verdicts.run.crash_match), the frame in the user's
    code, the fix."""
    crashed = [o for o in obs if o.crash is not None]
    faulted = [o for o in obs if o.faults.strip()]
    if crashed:
        o = crashed[0]
        c = o.crash
        assert c is not None
        cause = crash_match.explain(c.type, c.message, c.causes, log_lines,
                                    code=(c.user_frame or {}).get("code") or "")
        entry = cause.entry
        where = ""
        if c.user_frame:
            f = c.user_frame
            where = f" in {f['function']}() at {_short(f['file'])}:{f['line']}"
            if f.get("code"):
                where += f" (`{f['code'][:80]}`)"
        evidence = {"pid": o.pid, "type": c.type, "message": c.message[:2000],
                    "thread": c.thread, "user_frame": c.user_frame, "frames": c.frames[-8:],
                    "catalogue": entry.id if entry else None, "matched_in": cause.where,
                    "matched_line": cause.line[:500]}
        message = cause.line[:300]
        text = f"{c.type}{where}: {message}"
        if entry:
            text += f" - {entry.meaning}"
        advice = entry.fix if entry else "Read the traceback above (saved in " \
            "children/program/stderr.txt)."
        lost = crash_match.shape_lost_at(entry, o.dataset_calls)
        if lost is not None:
            text += f" Here {lost[1]}."
            evidence["shape_lost_at"] = lost[0].caller
            advice = f"At {lost[0].where}: {advice}"
        return Finding("run.crash", "fail", text, evidence, advice=advice,
                       title=_crash_title(c.type, c.user_frame, entry.id if entry else None),
                       actions=_crash_actions(lost[0].caller if lost is not None
                                              else c.user_frame, entry.fix if entry else None))
    if faulted:
        o = faulted[0]
        tail = [ln for ln in o.faults.strip().splitlines() if ln.strip()]
        return Finding("run.crash", "fail",
                       f"process {o.pid} died of a fatal signal: {tail[0] if tail else ''}",
                       {"pid": o.pid, "faulthandler": tail[-30:]},
                       title=title(f"process {o.pid} died of a fatal signal: "
                                   f"{tail[0] if tail else ''}",
                                   f"process {o.pid} died of a fatal signal"),
                       advice="A crash inside TensorFlow's C++ code or a library: the "
                       "Python stack in the evidence shows the call that triggered it.")
    printed = tracebacks.last_traceback(log_lines) if returncode and returncode > 0 else None
    if printed is not None:
        return _printed_crash(printed, returncode, log_lines)
    if returncode is not None and returncode < 0 and interrupted:
        return Finding("run.crash", "ok", "no uncaught Python exception before the "
                       f"interruption (the program then ended by signal {-returncode})",
                       {"returncode": returncode, "interrupted": True},
                       title="no uncaught Python exception before the interruption")
    if returncode is not None and returncode < 0:
        seen = [o for o in obs if o.imported_tf]
        last = [f"{s.label}: {counted(max((st.index for st in s.steps), default=-1) + 1, 'step')}"
                for o in seen for s in o.series]
        return Finding("run.crash", "fail",
                       f"the program was killed by signal {-returncode} with no Python "
                       f"exception; what the hooks recorded before survives"
                       + (f" ({'; '.join(last)})" if last else ""),
                       {"returncode": returncode, "recorded": last},
                       title=f"killed by signal {-returncode} with no Python exception",
                       advice="SIGKILL usually comes from the kernel's OOM killer (dmesg) or a "
                       "scheduler's time or memory limit.")
    return Finding("run.crash", "ok",
                   "no uncaught Python exception" + ("" if not returncode else
                                                     f" (the program exited {returncode} "
                                                     "itself)"),
                   {"returncode": returncode},
                   title="no uncaught Python exception" + (
                       "" if not returncode else f" (it exited {returncode} itself)"))


def frame_at(frame: dict[str, Any] | None) -> str | None:
    """``file:line`` of the user's frame (None: none known)."""
    return f"{_short(frame['file'])}:{frame['line']}" if frame and frame.get("file") else None


def _crash_title(kind: str, frame: dict[str, Any] | None, entry: str | None) -> str:
    at = frame_at(frame)
    what = f"{kind} at {at}" if at else kind
    return title(f"crash: {what} ({entry})" if entry else f"crash: {what}", f"crash: {what}",
                 f"crash: {kind}", "the program crashed with a Python exception")


def _crash_actions(frame: dict[str, Any] | None, fix: str | None) -> tuple[Action, ...]:
    """The catalogue's fix at the user's line that raised (none without a known fix)."""
    return (Action(fix, frame_at(frame)),) if fix else ()


def _printed_crash(printed: tracebacks.PrintedTraceback, returncode: int | None,
                   log_lines: Sequence[str]) -> Finding:
    """An exception the hooks did not see (the program's own excepthook, then os._exit),
    read from the traceback in its stderr."""
    f = printed.user_frame
    cause = crash_match.explain(printed.type, printed.message, (), log_lines,
                                code=(f or {}).get("code") or "")
    where = f" in {f['function']}() at {_short(f['file'])}:{f['line']}" if f else ""
    text = f"{printed.type}{where}: {cause.line[:300]}"
    if cause.entry:
        text += f" - {cause.entry.meaning}"
    return Finding("run.crash", "fail", text + f" (read from the traceback the program "
                   f"printed on its stderr before exiting {returncode})",
                   {"type": printed.type, "message": printed.message[:2000],
                    "user_frame": f, "frames": printed.frames[-8:], "returncode": returncode,
                    "seen_in": "stderr", "catalogue": cause.entry.id if cause.entry else None,
                    "matched_in": cause.where, "matched_line": cause.line[:500]},
                   title=_crash_title(printed.type, f, cause.entry.id if cause.entry else None),
                   actions=_crash_actions(f, cause.entry.fix if cause.entry else None),
                   advice=cause.entry.fix if cause.entry else "Read the traceback above "
                   "(saved in children/program/stderr.txt).")
