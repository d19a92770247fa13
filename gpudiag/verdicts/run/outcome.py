"""Findings about how gpudiag rode along with the program (pure: plain data in).

``run.saved-output``: the program's output that gpudiag could not save (a full disk), or
stopped saving to leave the disk's last free space to the program (the reserve); the
program went on and its output still reached the terminal.
``run.analysis``: gpudiag's own analysis of the run stopped at an error of its own; the
findings made before it are kept, the report is finished and the program's exit code is
gpudiag's.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpudiag.report import Finding
from gpudiag.verdicts.common import title


def saved_output(failures: Sequence[str], kept_free: Sequence[str] = ()) -> Finding | None:
    """One finding for the saved streams that failed (each a one-line message naming the
    file and the errno), or that gpudiag stopped to leave the disk's last free space to the
    program (``kept_free``: the file and why, each); None when everything was saved."""
    if not failures and kept_free:
        return Finding(
            "run.saved-output", "warn",
            f"gpudiag stopped saving the program's output before its disk filled: "
            f"{kept_free[0]}" + (f" (and {len(kept_free) - 1} more)" if len(kept_free) > 1
                                 else ""),
            {"kept_free": list(kept_free)},
            title="stopped saving the output to keep the disk's last space free",
            advice="The program's own writes had the space left, as plainly; its output "
                   "reached the terminal whole, but the saved copy (and the findings read "
                   "from it: placement, TensorFlow's log) ends there. Point --logdir at a "
                   "disk with room to keep it all.")
    if not failures:
        return None
    return Finding(
        "run.saved-output", "fail",
        f"gpudiag stopped saving the program's output: {failures[0]}"
        + (f" (and {len(failures) - 1} more)" if len(failures) > 1 else ""),
        {"failures": list(failures)},
        title="gpudiag could not save all of the program's output",
        advice="The program ran on and its output reached the terminal; the saved copy (and "
               "the findings read from it: placement, TensorFlow's log) ends where the disk "
               "filled. Free space or point --logdir at a disk with room, and run again.")


def survivors(held_by: Sequence[tuple[int, str]], forwarders: Sequence[int],
              still_held: bool) -> Finding | None:
    """``run.descendants``: processes the program started that outlived it holding its
    output (pid, command line), left running; ``forwarders``: the ``cat`` processes that go
    on copying their output to the terminal. ``still_held``: the output was still held
    open after the program ended, whether or not /proc could name who held it."""
    if not still_held:
        return None
    names = ", ".join(f"pid {pid} (`{cmd[:60]}`)" for pid, cmd in held_by)
    who = (f"{len(held_by)} process(es) the program started outlived it holding its output: "
           f"{names}" if held_by else
           "a process the program started outlived it holding its output (/proc could not "
           "name it)")
    if forwarders:
        rest = ("; left running, as it would be plainly; its output goes on reaching the "
                f"terminal through cat (pid {', '.join(map(str, forwarders))}), not saved")
    else:
        rest = "; left running; no cat to forward its later output, which is lost"
    return Finding(
        "run.descendants", "warn", who + rest,
        {"descendants": [{"pid": pid, "command": cmd} for pid, cmd in held_by],
         "forwarders": list(forwarders)},
        title=title(f"{len(held_by)} process(es) the program started outlived it",
                    "a process the program started outlived it") if held_by else
        "a process the program started outlived it",
        advice="The program's end is its own exit: findings cover the program up to there. "
               "A process started with start_new_session=True left gpudiag's process group on "
               "purpose, so gpudiag neither waits for it nor ends it; stop it yourself "
               "(kill PID) if it should not go on.")


def analysis_failed(error_type: str, error: str, where: str, returncode: int | None
                    ) -> Finding:
    """gpudiag's final analysis raised ``error_type: error`` at ``where`` (file:line in
    gpudiag): said, never a traceback; what was found before it stays in the report."""
    return Finding(
        "run.analysis", "warn",
        f"gpudiag's analysis of the run stopped at an error of its own ({error_type}: "
        f"{error[:200]}, at {where}): the findings above it are kept, the ones after it are "
        f"missing; the program ran as it would have (exit code {returncode}, forwarded)",
        {"error_type": error_type, "error": error[:2000], "where": where,
         "returncode": returncode},
        title=title(f"gpudiag's own analysis stopped at {error_type}: findings after it "
                    "missing", "gpudiag's own analysis stopped early: findings after it "
                    "missing"),
        advice="Report it as a gpudiag bug with this report.json (the program's events "
               "files under children/program/ show what it read).")
