"""`gpudiag try -- python train.py`: the advised fixes measured on the user's own program,
applied in-process at the user's lines, never by editing a file (docs/try.md).

First the diagnosis: the program as written under `gpudiag run` (or ``--from`` an earlier
run of the same command). The fixes it advises that gpudiag.fixes applies are chosen
(gpudiag.fixes.choice); then rounds of measured trials, the program as written and each
fix interleaved (A B C A B C ...), each a whole `gpudiag run` directory under the try run's
``runs/`` (gpudiag.layout.trial) with no profiled window, its fit stopped after warm-up +
``--steps`` steps. Each trial's steady step is the median step of its run.throughput
finding (the warm-up left out); gpudiag.verdicts.trial turns them into findings. TF-free.
"""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpudiag import layout, nvml
from gpudiag.commands import run as run_cmd
from gpudiag.commands.trialread import (
    command_evidence,
    read_trial,
    recorded_calls,
    returncode_of,
)
from gpudiag.errors import Interrupted, UsageError
from gpudiag.fixes import BY_NAME, Chosen
from gpudiag.fixes.choice import NotTried, choose
from gpudiag.layout.compared import TriedFix
from gpudiag.layout.units import counted
from gpudiag.records.trial import TrialFix
from gpudiag.run.options import RunOptions
from gpudiag.session import RunSession
from gpudiag.ui import Ui
from gpudiag.verdicts import headline
from gpudiag.verdicts import trial as verdicts

WARMUP_STEPS = 10  # left out of each trial's median (run.throughput's warm-up)
DEFAULT_STEPS = 100
DEFAULT_ROUNDS = 3


@dataclass(frozen=True)
class TryOptions:
    rounds: int = DEFAULT_ROUNDS
    steps: int | None = DEFAULT_STEPS  # None: each trial runs to its end
    from_dir: Path | None = None
    dry_run: bool = False
    only: tuple[str, ...] = ()  # the fixes to try (empty: every one advised)
    stdout_to_stderr: bool = False  # --json: the diagnosis's program output on stderr
    run: RunOptions = field(default_factory=RunOptions)


def run(session: RunSession, argv: list[str], *,
        backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: TryOptions,
        ui: Ui) -> int | None:
    """Diagnose, choose the fixes, run the trials, report. Returns the diagnosis's exit
    code (None: it has none)."""
    ui.say("gpudiag try runs the program once for the diagnosis and once per trial: its "
           "side effects (files it writes, checkpoints) happen each time")
    report, diag_dir, code = _diagnosis(session, argv, backend, options, ui)
    if code is not None:
        session.forward_exit(code)
    _check_tensorflow(report)
    bottleneck = next((f for f in report.get("findings", [])
                       if f.get("id") == "run.bottleneck"), None)
    chosen, not_tried = choose(bottleneck.get("actions") or [] if bottleneck else [],
                               bottleneck.get("evidence") or {} if bottleneck else {},
                               recorded_calls(diag_dir))
    skipped = verdicts.not_tried_finding(not_tried)
    if skipped is not None:
        session.add(skipped)
    chosen = [c for c in chosen if not options.only or c.fix.name in options.only]
    if not chosen:
        nothing = _nothing_to_try(bottleneck, not_tried, options.only)
        session.set(layout.TRY_DATA, {"headline": nothing.evidence["headline"]})
        session.add(nothing)
        return code
    plan = [(r, c) for r in range(1, options.rounds + 1) for c in [None, *chosen]]
    _say_plan(ui, plan, chosen, report, options)
    if options.dry_run:
        session.set(layout.TRY_DATA, {"headline": f"dry run: {counted(len(plan), 'trial')} "
                                                  f"planned, "
                                      f"none run ({', '.join(c.fix.name for c in chosen)})"})
        return code
    _trials(session, argv, backend, options, ui, plan, chosen, report)
    return code


#: A trial is ended as hung past this many times the diagnosis's whole run (which ran the
#: program to its end, profiled), and never before TRIAL_LIMIT_MIN_S: room for a busy
#: machine, and for a fix that makes a step slower without hanging.
TRIAL_LIMIT_TIMES = 4
TRIAL_LIMIT_MIN_S = 120.0


def trial_limit_s(report: dict[str, Any]) -> float | None:
    """How long a trial may run before gpudiag ends it as hung (None: the diagnosis's
    duration is not known, so no limit: Ctrl-C ends a trial that hangs)."""
    duration = command_evidence(report).get("duration_s")
    if not isinstance(duration, int | float):
        return None
    return float(round(max(TRIAL_LIMIT_MIN_S, TRIAL_LIMIT_TIMES * duration)))


def judged_loop(report: dict[str, Any]) -> str:
    """The series of the diagnosis's judged loop (run.throughput's first): ``Model.fit``,
    ``tf.function train_step`` ... (``Model.fit`` when none was measured)."""
    found: dict[str, Any] = next((f for f in report.get("findings", [])
                                  if f.get("id") == "run.throughput"), {})
    loops = (found.get("evidence") or {}).get("loops") or []
    series = loops[0].get("series") if loops and isinstance(loops[0], dict) else None
    return series if isinstance(series, str) and series else "Model.fit"


def check_single_process() -> None:
    """A multi-worker job (TF_CONFIG set) is refused before anything runs: this first
    version does not try one."""
    if os.environ.get("TF_CONFIG"):
        raise UsageError("TF_CONFIG is set: gpudiag try does not try multi-worker jobs yet; "
                         "run gpudiag run on each worker")


def _diagnosis(session: RunSession, argv: list[str],
               backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: TryOptions,
               ui: Ui) -> tuple[dict[str, Any], Path, int | None]:
    """The diagnosis's report, run directory and exit code: run now, or read ``--from``."""
    if options.from_dir is not None:
        from gpudiag.rundir import load_run

        earlier = load_run(options.from_dir)
        if earlier.command != "run":
            raise UsageError(f"--from {options.from_dir}: a {earlier.command} run, not a "
                             "gpudiag run")
        said = ((earlier.report_json.get("data") or {}).get("run") or {}).get("command")
        if said and list(said) != list(argv):
            raise UsageError(f"--from {options.from_dir} ran {' '.join(said)}, not "
                             f"{' '.join(argv)}")
        code = returncode_of(earlier.report_json)
        return earlier.report_json, options.from_dir, code
    diag_dir = session.run_dir / layout.TRY_RUNS_DIR / layout.TRY_DIAGNOSIS
    ui.say(f"the diagnosis: the program as written, profiled -> {diag_dir}")
    with RunSession.at("run", diag_dir) as diag:
        code = run_cmd.run(diag, argv, backend=backend, options=options.run, ui=ui,
                           stdout_to_stderr=options.stdout_to_stderr)
    report = diag.report.to_dict()
    for line in headline.verdict(report):
        ui.say_line(f"  {line}")
    return report, diag_dir, code


def _check_tensorflow(report: dict[str, Any]) -> None:
    tf = next((f for f in report.get("findings", []) if f.get("id") == "run.tensorflow"), None)
    if tf is None or tf.get("status") == "skip":
        raise UsageError("the program never imported TensorFlow: gpudiag try has nothing to "
                         "try (its diagnosis is in the try run's runs/diagnosis)")


def _nothing_to_try(bottleneck: dict[str, Any] | None, not_tried: Sequence[NotTried],
                    only: Sequence[str] = ()) -> Any:
    from gpudiag.report import Finding

    if only:
        why = f"the diagnosis advised none of the fixes asked for ({', '.join(only)})"
    elif bottleneck is None:
        why = "the diagnosis found no bottleneck to fix"
    elif not_tried:
        why = "none of the advised fixes is one gpudiag applies in-process"
    else:
        why = f"the diagnosis advised no fix ({bottleneck.get('title') or 'no bottleneck'})"
    return Finding("try.result", "skip", f"nothing to try: {why}; the diagnosis stands",
                   {"headline": f"nothing to try: {why}", "fixes": [], "trials": []},
                   title=verdicts.title(f"nothing to try: {why}", "nothing to try"))


def _say_plan(ui: Ui, plan: Sequence[tuple[int, Chosen | None]], chosen: Sequence[Chosen],
              report: dict[str, Any], options: TryOptions) -> None:
    each = estimate_trial_s(report, options.steps)
    est = f", about {each * len(plan) / 60:.1f} min" if each is not None else ""
    ui.say(f"{counted(len(plan), 'trial')} ({counted(options.rounds, 'round')} of the program "
           f"as written and "
           f"{len(chosen)} fix(es)){est}")
    width = ui.console.width if ui.console is not None else headline.WIDTH
    for c in chosen:
        module = BY_NAME[c.fix.name]
        # the words wrap at the terminal's width; the code lines stay whole, to copy
        for line in headline.wrap(f"{verdicts.label(c)}: {module.FIX.changes}", width,
                                  lead="  ", indent="    "):
            ui.say_line(line)
        for what, code in (("as written:    ", c.as_written),
                           ("as it would be:", c.as_it_would_be)):
            if code:
                ui.say_line(f"    {what} {code}")


def estimate_trial_s(report: dict[str, Any], steps: int | None) -> float | None:
    """One trial's seconds, from the diagnosis: its start-up (the run's duration less its
    steps) and ``WARMUP_STEPS + steps`` of its median step (None: not known)."""
    found = {f.get("id"): f.get("evidence") or {} for f in report.get("findings", [])}
    duration = found.get("run.command", {}).get("duration_s")
    loops = found.get("run.throughput", {}).get("loops") or []
    if not isinstance(duration, int | float) or not loops:
        return None
    step = loops[0].get("step_s_median")
    total = (loops[0].get("timed_steps") or 0) + (loops[0].get("warmup_steps") or 0)
    if not isinstance(step, int | float):
        return None
    start = max(0.0, duration - total * step)
    n = total if steps is None else min(total, WARMUP_STEPS + steps)
    return start + n * step


def _trials(session: RunSession, argv: list[str],
            backend: nvml.NvmlBackend | nvml.NvmlUnavailable, options: TryOptions, ui: Ui,
            plan: Sequence[tuple[int, Chosen | None]], chosen: Sequence[Chosen],
            report: dict[str, Any]) -> None:
    """Run the plan; the findings of the trials that finished (Ctrl-C: those, then the
    interrupt goes on). A custom loop's step tf.function (the diagnosis's judged loop)
    ends each trial's process after the same steps as a fit; a trial past its time limit
    (from the diagnosis's duration) is ended as hung."""
    loop = judged_loop(report)
    stop = WARMUP_STEPS + options.steps if options.steps is not None else None
    function = loop.removeprefix("tf.function ") if loop.startswith("tf.function ") else None
    # like for like: every trial under the same hooks, none profiled, none logging its
    # placement (the diagnosis did both)
    base = replace(options.run, profile_steps=0, profile_warmup_steps=WARMUP_STEPS,
                   placement_log=False, stop_after_steps=stop, echo=False, quiet=True,
                   stop_function=function if stop is not None else None,
                   time_limit_s=trial_limit_s(report))
    trials: list[verdicts.Trial] = []
    interrupt: KeyboardInterrupt | None = None
    early: int | None = None
    with _signals_seen() as seen:
        for i in range(1, len(plan) + 1):
            try:
                done = _one_trial(session, argv, backend, base, ui, i, plan)
            except KeyboardInterrupt as exc:
                interrupt = exc
            if seen and interrupt is None:  # the program ended by itself on it: not counted
                interrupt = Interrupted(seen[0])
            if interrupt is None:
                trials.append(done)
                if i < len(plan) and plan[i][0] != done.round and \
                        verdicts.decided(chosen, trials):
                    early = done.round
                    ui.say(f"every fix's interval decided after round {early}: the other "
                           "rounds are not run")
                    break
            else:
                ui.say("interrupted: the trial that ran was stopped; the trials that "
                       "finished are reported")
                break
    ui.say("")
    for c in chosen:
        found = session.add(verdicts.fix_finding(c, trials))
        ev = TriedFix.from_dict(found.evidence)
        for line in verdicts.shown(ev, found.message.split("; ", 1)[0]):
            ui.say_line(line)
    result = verdicts.result_finding(chosen, trials, stop, interrupted=interrupt is not None,
                                     loop=loop, early_after=early)
    session.set(layout.TRY_DATA, {"headline": result.evidence["headline"]})
    session.add(result)
    if interrupt is not None:
        raise interrupt


def trial_options(base: RunOptions, fix: TrialFix | None) -> RunOptions:
    """One trial's options: ``fix`` applied, and where it runs N steps a call
    (steps_per_execution) its warm-up and its stop counted in calls of N, so that it trains
    the same steps as the program as written (a fit of 144 steps is 9 calls of 16: a
    warm-up of 10 calls would leave no step measured)."""
    options = replace(base, trial_fixes=(fix,) if fix else ())
    per_call = getattr(BY_NAME[fix.name], "steps_per_call", None) if fix else None
    n = per_call(fix) if per_call is not None else 1
    if n <= 1:
        return options
    stop = options.stop_after_steps
    return replace(options, profile_warmup_steps=max(1, -(-options.profile_warmup_steps // n)),
                   stop_after_steps=None if stop is None else max(2, -(-stop // n)))


def _one_trial(session: RunSession, argv: list[str],
               backend: nvml.NvmlBackend | nvml.NvmlUnavailable, base: RunOptions, ui: Ui,
               i: int, plan: Sequence[tuple[int, Chosen | None]]) -> verdicts.Trial:
    """Trial ``i`` of the plan, run in its own run directory and read back."""
    round_no, c = plan[i - 1]
    name = c.fix.name if c else ""
    what = verdicts.label(c) if c else "the program as written"
    ui.say(f"trial {i} of {len(plan)}: round {round_no}, {what}")
    run_dir = (session.run_dir / layout.TRY_RUNS_DIR /
               layout.trial_dir_name(round_no, name or layout.TRY_AS_WRITTEN))
    with RunSession.at("run", run_dir) as one:
        run_cmd.run(one, argv, backend=backend, ui=Ui.quiet(),
                    options=trial_options(base, c.fix if c else None))
    # the loss is compared where a fix tried can change it: its trials' and the baseline's
    losses = any(BY_NAME[x.fix.name].FIX.can_change_results for _, x in plan if x is not None) \
        and (c is None or BY_NAME[c.fix.name].FIX.can_change_results)
    return read_trial(run_dir, name, round_no, c, with_losses=losses)


@contextlib.contextmanager
def _signals_seen() -> Iterator[list[int]]:
    """The interrupting signals (Ctrl-C, SIGTERM) that arrive while the trials run, in
    order; each is still handled as before (passed on to the program by `run`). A program
    that ends by itself on one leaves `run` no interrupt to raise: this list still says
    that the user asked to stop."""
    seen: list[int] = []
    previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}

    def handler(signum: int, frame: Any) -> None:
        seen.append(signum)
        before = previous[signal.Signals(signum)]
        if callable(before):
            before(signum, frame)
        elif signum == signal.SIGINT:
            raise KeyboardInterrupt

    for s in previous:
        signal.signal(s, handler)
    try:
        yield seen
    finally:
        for s, before in previous.items():
            signal.signal(s, before)
