"""Verdicts of `gpudiag run` about the program's progress: the command itself, learning,
the profiler window (the step time is run_throughput's, the crash run/crash's, memory and
the Sessions' configuration run/memory_config's).

Pure functions of gpudiag.records.run and plain numbers, like gpudiag.verdicts.run.process.
``proc`` as there.
"""

from __future__ import annotations

import math
import shlex
import signal
from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import counted
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Finding, Status
from gpudiag.verdicts import stats
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import learning_causes, replica_losses
from gpudiag.verdicts.run import throughput as run_throughput
from gpudiag.verdicts.run.training_runs import epoch_losses, training_runs

# A loss within LN_TOLERANCE of ln(k) is "at ln k"; it has "not fallen" when its level is
# at least STUCK_FRACTION of where it started: the mean of its first batch losses (up to
# START_WINDOW, at most a quarter of them), since one batch's loss is noisy (a first batch
# of 8 examples that happens to sit at ln 4 made a model learning slowly read as stuck).
LN_TOLERANCE = learning_causes.LN_TOLERANCE
STUCK_FRACTION = learning_causes.STUCK_FRACTION
START_WINDOW = 10
MIN_JUDGED_STEPS = 5
# a fit whose batches were not seen (tf_keras refuses batch-level callbacks under
# ParameterServerStrategy): judged from its epochs' losses, each the mean of an epoch
MIN_JUDGED_EPOCHS = 3
ACCURACY_KEYS = ("accuracy", "acc", "sparse_categorical_accuracy", "categorical_accuracy")


def command(argv: Sequence[str], returncode: int | None, duration_s: float,
            interrupted: bool, interrupted_by: str = "SIGINT", *,
            time_limited_s: float | None = None) -> Finding:
    """The program ran; its exit code (forwarded) and how long it took. Interrupted: by
    which signal (SIGINT is Ctrl-C), and whether the program ended on it or had to be
    killed (TensorFlow's preemption notifier catches SIGTERM in multi-worker programs).
    ``time_limited_s``: a `gpudiag try` trial ended by gpudiag at its time limit."""
    shown = " ".join(shlex.join(argv).split())  # one line, whole: the terminal wraps it
    evidence = {"command": list(argv), "returncode": returncode,
                "duration_s": round(duration_s, 3), "interrupted": interrupted,
                "interrupted_by": interrupted_by if interrupted else None,
                "time_limited_s": time_limited_s}
    if time_limited_s is not None:
        return Finding("run.command", "fail", f"`{shown}` did not end within its time limit "
                       f"of {time_limited_s:g} s: gpudiag ended it", evidence,
                       title=f"the program did not end within {time_limited_s:g} s: "
                             "gpudiag ended it")
    if returncode is not None and returncode < 0:
        try:
            how = f"was killed by {signal.Signals(-returncode).name}"
        except ValueError:
            how = f"was killed by signal {-returncode}"
    else:
        how = f"exited with code {returncode}"
    if interrupted:
        said = "Ctrl-C" if interrupted_by == "SIGINT" else interrupted_by
        text = f"interrupted ({said}) after {duration_s:.1f} s; `{shown}` {how}"
        if returncode == -signal.SIGKILL and interrupted_by != "SIGKILL":
            text += (f": it did not end on the {interrupted_by} gpudiag passed on, so gpudiag "
                     "killed it")
        return Finding("run.command", "warn", text, evidence,
                       advice="The findings cover only the time before the interruption.",
                       title=f"interrupted ({said}) after {duration_s:.1f} s; the program {how}")
    if returncode == 0:
        return Finding("run.command", "ok", f"`{shown}` exited with code 0 after "
                       f"{duration_s:.1f} s", evidence,
                       title=f"the program exited with code 0 after {duration_s:.1f} s")
    return Finding("run.command", "fail", f"`{shown}` {how} after {duration_s:.1f} s", evidence,
                   advice="gpudiag exits with the same code; run.crash says why when it can.",
                   title=f"the program {how} after {duration_s:.1f} s")


# ---------------------------------------------------------------- learning


def _accuracy(series: StepSeries) -> float | None:
    logs = series.epochs[-1] if series.epochs else (
        series.steps[-1].metrics if series.steps else {})
    for key in ACCURACY_KEYS:
        if key in logs:
            return float(logs[key])
    return None


def learning(obs: ProcessObservation, proc: str = "") -> Finding:
    """Per training run (training_runs): did the loss fall? Is it stuck at ln(classes), is
    accuracy at chance, did the weights move at all?"""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    worst: Status = "ok"
    titles: dict[Status, str] = {}
    for s in training_runs(obs.series):
        judged = _judge_run(obs, s)
        if judged is None:
            continue
        row, text, status = judged
        rows.append(row)
        titles.setdefault(status, _learning_title(row, status))
        problems.append(text)
        if status == "fail":
            worst = "fail"
        elif status == "warn" and worst == "ok":
            worst = "warn"
    warned = learning_causes.learning_warnings(obs)
    evidence = {"loops": rows, "ln_tolerance": LN_TOLERANCE, "stuck_fraction": STUCK_FRACTION,
                "warnings": [w.to_dict() for w in warned]}
    if warned and rows:
        problems.append(learning_causes.said(warned))
        worst = "warn" if worst == "ok" else worst
    if not rows:
        return Finding(f"run.learning{proc}", "skip",
                       f"no training loop with at least {MIN_JUDGED_STEPS} observed losses "
                       "(Keras fit, a step tf.function returning its loss, or Session.run "
                       f"fetching it), nor a fit with {MIN_JUDGED_EPOCHS} epochs' losses",
                       evidence, title="no training loop with enough losses to judge")
    advice = ""
    if worst != "ok":
        advice = ("A loss at ln(classes) means uniform predictions. Weights that never move "
                  "mean no update reaches them: a learning rate of 0, gradients that are None "
                  "or zero (loss not computed from the model under the tape, "
                  "stop_gradient, trainable=False), or an optimizer applied to other "
                  "variables. Moving weights with a flat loss: a learning rate too small, "
                  "labels that do not match the inputs, or a last layer that saturates.")
    advice = learning_causes.advice(warned, any(r["softmax_floor"] for r in rows), advice)
    more = f" (+{len(rows) - 1} more loop(s))" if len(rows) > 1 else ""
    head = titles.get(worst)
    options = [head + more, head] if head else [
        f"{titles['ok']}; {len(warned)} warning(s) about the loss",
        f"{len(warned)} warning(s) about the loss"]
    return Finding(f"run.learning{proc}", worst, "; ".join(problems), evidence, advice=advice,
                   title=title(*options))


def _learning_title(row: dict[str, Any], status: Status) -> str:
    """One training run's answer: ``loss 2.72 -> 0.013 in 120 steps: it learns``."""
    losses = (f"loss {row['first_loss']:.3g} -> {row['last_loss']:.3g} in "
              f"{counted(row['steps'], 'step')}")
    classes = row["stuck_at_ln_classes"]
    if row["weights_moved"] is False:
        return f"not learning: the weights never changed ({losses})"
    if classes:  # the level judged (its interval), as the message says it
        ln, level = math.log(classes), row["loss_level"]
        if row["loss_interval"][0] <= (1 + LN_TOLERANCE) * ln:
            return f"not learning: loss {level:.3g} = ln {classes}, all classes alike"
        return (f"not learning: loss {level:.3g}, far above ln {classes} = {ln:.3g}, "
                "worse than all classes alike")
    if row["softmax_floor"]:
        return title(f"{losses}: stuck at the softmax-twice floor {row['softmax_floor']:.3g}",
                     f"stuck at the softmax-twice floor {row['softmax_floor']:.3g}")
    if status == "warn":
        chance = " (accuracy at chance)" if row["accuracy_at_chance"] else ""
        return title(f"{losses}: not falling{chance}", f"the loss is not falling{chance}")
    return f"{losses}: it learns"


def _judged_losses(s: Any) -> tuple[list[float], int, str, str] | None:
    """The losses a training run is judged from: its steps', else its epochs' means (None:
    too few of either); with the step count, where they came from and the words for it."""
    losses = [st.loss for st in s.steps if st.loss is not None and math.isfinite(st.loss)]
    count = sum(st.count for st in s.steps)
    if len(losses) >= MIN_JUDGED_STEPS:
        return losses, count, "steps", counted(count, "step")
    losses, count = epoch_losses(s)
    if len(losses) < MIN_JUDGED_EPOCHS:
        return None
    epochs = counted(len(losses), "epoch")
    over = (f"{epochs} (each epoch's mean loss: the batches were not "
            f"recorded; {counted(count, 'step')})" if count else epochs)
    return losses, count, "epochs", over


def _judge_run(obs: ProcessObservation, s: Any) -> tuple[dict[str, Any], str, Status] | None:
    """One training run: its row of evidence, its sentence, and its status. Every
    threshold is held against the measured value's interval (learning_causes.tail_level,
    accuracy_against_chance): a clear side decides, an interval across the line is a warn
    "near the threshold" whichever side the value fell on this time."""
    judged = _judged_losses(s)
    if judged is None:
        return None
    losses, count, source, over = judged
    scale = replica_losses.loss_scale(s) if source == "steps" else replica_losses.LossScale(1)
    if scale.factor and scale.factor > 1:  # summed over the replicas: per replica
        losses = [x / scale.factor for x in losses]
    first = losses[0]
    head = losses[:max(1, min(START_WINDOW, len(losses) // 4))]
    start = math.fsum(head) / len(head)
    last = float(s.epochs[-1]["loss"]) if s.epochs and "loss" in s.epochs[-1] else losses[-1]
    weights = next((w for w in obs.weights if w.source == s.label
                    or (s.kind == "fit" and w.source == "Model.fit")), None)
    moved = weights.moved if weights else None
    # the level and where it started from each batch's own loss where the program's were
    # running means (a Keras fit): the spread of batches, not of a mean settling
    batches = learning_causes.batch_losses(s) if source == "steps" else None
    if batches and scale.factor and scale.factor > 1:
        batches = [x / scale.factor for x in batches]
    judged_on = batches or losses
    level, interval, level_from = learning_causes.tail_level(judged_on)
    if batches:
        level_from = level_from.replace("losses", "batch losses")
        head = batches[:max(1, min(START_WINDOW, len(batches) // 4))]
        start = math.fsum(head) / len(head)
    falling = stats.against(level, interval, STUCK_FRACTION * start, level_from)
    c = s.num_classes if s.num_classes and s.num_classes > 1 and scale.factor else None
    ln = math.log(c) if c else None
    below_ln = stats.against(level, interval, (1 - LN_TOLERANCE) * ln, level_from) \
        if ln else None
    floor = learning_causes.at_softmax_floor(losses, last, c, LN_TOLERANCE)
    acc = _accuracy(s)
    if acc is not None and not s.epochs and scale.factor and scale.factor > 1:
        acc /= scale.factor  # a batch's accuracy summed over the replicas as its loss
    chance = learning_causes.accuracy_against_chance(
        acc, learning_causes.last_epoch_examples(s.steps, s.batch_size), c) \
        if acc is not None and c else None
    verdict = learning_causes.judge(learning_causes.Level(level, interval, level_from),
                                    below_ln, falling, chance, c, floor, acc)
    cause, status = verdict.cause, verdict.status
    text = f"{s.label}: loss {first:.4f} -> {last:.4f} over {over}{verdict.words}"
    if scale.words:
        text += f" ({scale.words})"
    elif verdict.cause == "not-falling" and not c:
        text += (f" (no ln(classes) check: the number of classes is unknown, "
                 f"{s.facts.get('classes_from') or 'no evidence of it'})")
    if acc is not None:
        text += f", accuracy {acc:.3f}" + (" (chance)" if chance is not None
                                           and chance.side == stats.BELOW else "")
    if moved is False:
        steps = weights.calls_between if weights else "?"
        text += (f"; the weights did not change at all over {counted(steps, 'step')}: this is not "
                 "a device problem, the updates never reach the weights")
        if s.facts.get("learning_rate") == 0:
            text += " (the learning rate is 0)"
        status = "fail"
    elif moved:
        text += "; the weights moved"
    row = {"series": s.label, "steps": count, "first_loss": first, "start_loss": start,
           "judged_from": source, "last_loss": last, "num_classes": s.num_classes,
           "classes_from": s.facts.get("classes_from"),
           "stuck_at_ln_classes": c if cause == "not-learning" else None,
           "softmax_floor": floor, "accuracy": acc,
           "accuracy_at_chance": chance is not None and chance.side == stats.BELOW,
           "cause": cause, "loss_level": level, "loss_interval": list(interval),
           "loss_interval_from": level_from,
           "loss_against_ln_classes": below_ln.to_dict() if below_ln else None,
           "accuracy_against_chance": chance.to_dict() if chance else None,
           "loss_against_start": falling.to_dict(),
           "weights_moved": moved, "learning_rate": s.facts.get("learning_rate"),
           "loss_divided_by": scale.factor, "loss_scale_words": scale.words or None,
           "running_mean": s.kind == "fit", "epoch_starts": learning_causes.epoch_starts(s)}
    return row, text, status


# ---------------------------------------------------------------- profile


def profile(obs: ProcessObservation, busy: dict[str, float] | None, window_s: float | None,
            reason: str | None, warmup: int, proc: str = "") -> Finding:
    """The profiler window over the program's own steps: busy time per device."""
    p = obs.profile
    evidence = {"profile": None if p is None else {"status": p.status, "logdir": p.logdir,
                                                    "source": p.source, "steps": p.steps,
                                                    "error": p.error},
                "busy_s": busy, "window_s": window_s, "reason": reason}
    if p is None:
        unseen = run_throughput.unseen_fit_batches(obs)
        return Finding(f"run.profile{proc}", "skip",
                       f"no profiler window: {unseen}" if unseen else
                       f"no profiler window: no training loop reached step {warmup} after "
                       "its warm-up" + (f" ({reason})" if reason else ""), evidence,
                       title="no profiler window" + (": Keras fit's batches unseen" if unseen
                                                     else f": no loop reached step {warmup}"))
    if p.status == "skipped":
        return Finding(f"run.profile{proc}", "skip", p.error or "no profiler window",
                       evidence, title="no profiler window: skipped",
                       advice="`gpudiag scaling --workers N` traces a "
                       "multi-worker run's steps with its own probe.")
    if p.status == "failed" or (busy is None and window_s is None):
        why = p.error or reason or "no trace was written"
        return Finding(f"run.profile{proc}", "warn",
                       f"the profiler window on {p.source} gave no trace: {why}",
                       evidence, title=title(f"the profiler window on {p.source} gave no trace",
                                             "the profiler window gave no trace"),
                       advice="If the program runs its own profiler, pass "
                       "--profile-steps 0.")
    steps = f"steps {p.steps[0]}-{p.steps[-1]}" if p.steps else "a partial window"
    if p.status == "stopped-at-exit":
        steps += " (the program ended inside the window)"
    window = f" ({window_s * 1e3:.1f} ms)" if window_s else ""
    if not busy:
        return Finding(f"run.profile{proc}", "warn",
                       f"trace of {steps} of {p.source}{window}: no op in it could be "
                       "attributed to a device (no placement evidence for its ops)", evidence,
                       title=f"a trace of {steps}: no op attributed to a device",
                       advice="Keep the placement log on (no TF_CPP_MIN_LOG_LEVEL in the "
                       "program); open the trace in TensorBoard's Profile tab.")
    text = (f"trace of {steps} of {p.source}{window}: " + ", ".join(
        f"{d} busy {b * 1e3:.1f} ms" + (f" ({pct(b / window_s)})" if window_s else "")
        for d, b in busy.items()) + "; in TensorBoard's Profile tab "
        f"({p.logdir.rsplit('/', 1)[-1]})")
    return Finding(f"run.profile{proc}", "ok", text, evidence,
                   title=title(f"traced {steps} of {p.source}{window}",
                               f"traced {steps}{window}", "traced a profiler window"))


