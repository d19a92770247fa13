"""``gpudiag.try_fixes``: `gpudiag try` as a library call (docs/api.md, docs/try.md).

The program is run as `gpudiag try -- ARGV` runs it: the diagnosis, then rounds of trials
with each advised fix applied in-process at the program's own line, each trial a whole run
directory under the try run's ``runs/``. The result is typed: the try run read back
(gpudiag.rundir.Run), the answer's first line, each fix measured (the TriedFix evidence of
its ``try.fix.<fix>`` finding) and the diagnosis's exit code. Nothing is printed of
gpudiag's (a quiet Ui); the program's own output goes where the caller's does.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudiag.errors import UsageError
from gpudiag.layout.compared import TriedFix
from gpudiag.rundir import Run


@dataclass(frozen=True)
class TryResult:
    """What ``try_fixes`` measured: ``run`` (the try run directory, read back: its
    ``try.*`` findings and each trial's run directory under ``run.path / "runs"``),
    ``headline`` (the answer's first line: the best measured fix, or that none helped, or
    nothing to try), ``fixes`` (each fix tried: B/A with its interval, the line as written
    and as it would be, the prediction beside it) and ``returncode`` (the diagnosis's exit
    code; None: it has none)."""

    run: Run
    headline: str
    fixes: tuple[TriedFix, ...]
    returncode: int | None


def try_fixes(argv: Sequence[str], *, logdir: str | Path = "runs", rounds: int = 3,
              steps: int | None = 100, fixes: Sequence[str] = (),
              from_run: str | Path | None = None, dry_run: bool = False) -> TryResult:
    """Measure the fixes the diagnosis advises on the program ``argv`` (``["python",
    "train.py"]``), unedited, as `gpudiag try` does: ``rounds`` rounds of the program as
    written and each fix interleaved, each trial's fit stopped after its warm-up and
    ``steps`` measured steps (None: run to its end). ``fixes``: only these (fix names,
    gpudiag.fixes); ``from_run``: the fixes of an earlier `gpudiag run` of the same command,
    not diagnosed again; ``dry_run``: diagnose and plan, run no trial. The program runs
    once per trial: its side effects happen each time. Written under ``logdir``.

    Raises UsageError (one line) on bad input (no command, an unknown fix, TF_CONFIG set,
    rounds below 1, a program that never imports TensorFlow); KeyboardInterrupt after the
    finished trials are reported when interrupted. Call it from the main thread (it
    passes Ctrl-C on to the program as `gpudiag run` does)."""
    from gpudiag import nvml
    from gpudiag.api.calls import _edge, _path
    from gpudiag.commands import run as run_cmd
    from gpudiag.commands import tryfixes
    from gpudiag.session import RunSession
    from gpudiag.ui import Ui

    if isinstance(argv, str) or not all(isinstance(a, str) for a in argv):
        raise UsageError("argv must be a list of strings: the program and its arguments")
    unknown = sorted(set(fixes) - set(tryfixes.BY_NAME))
    if unknown:
        raise UsageError(f"no such fix: {', '.join(unknown)} (known: "
                         f"{', '.join(tryfixes.BY_NAME)})")
    if rounds < 1 or (steps is not None and steps < 1):
        raise UsageError("rounds must be at least 1 and steps at least 1 (or None)")
    command = run_cmd.resolve(list(argv), name="try")
    tryfixes.check_single_process()
    options = tryfixes.TryOptions(
        rounds=rounds, steps=steps, dry_run=dry_run, only=tuple(fixes),
        from_dir=None if from_run is None else _path(from_run, "from_run"))
    with _edge(), nvml.opened() as backend, \
            RunSession("try", _path(logdir, "logdir")) as session:
        code = tryfixes.run(session, command, backend=backend, options=options,
                            ui=Ui.quiet())
    return read_result(session.run_dir, code)


def read_result(run_dir: Path, code: int | None) -> TryResult:
    """The TryResult of the try run directory ``run_dir`` (``code``: its diagnosis's exit
    code)."""
    from gpudiag.api.calls import _edge
    from gpudiag.rundir import load_run

    with _edge():
        run = load_run(run_dir)
    found = [f for f in run.report.findings if f.id.startswith("try.fix.")]
    data = run.report.data.get("try") or {}
    return TryResult(run, str(data.get("headline") or ""),
                     tuple(TriedFix.from_dict(f.evidence) for f in found), code)
