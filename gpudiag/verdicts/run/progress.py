"""Verdicts of `gpudiag run` about the program's progress: learning, memory, its Sessions'
configuration, the profiler window, the crash, the command itself (the step time is
run_throughput's).

Pure functions of gpudiag.records.run and plain numbers, like gpudiag.verdicts.run.process.
``proc`` as there.
"""

from __future__ import annotations

import math
import shlex
import signal
from collections.abc import Sequence
from typing import Any

from gpudiag.catalogue import match_crash
from gpudiag.layout.units import counted
from gpudiag.layout.units import share as pct
from gpudiag.records.run import ProcessObservation, StepSeries
from gpudiag.report import Action, Finding, Status
from gpudiag.verdicts import stats
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import crash_match, learning_causes, replica_losses, tracebacks
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
MEMORY_FULL_FRACTION = 0.9


def _short(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def command(argv: Sequence[str], returncode: int | None, duration_s: float,
            interrupted: bool, interrupted_by: str = "SIGINT") -> Finding:
    """The program ran; its exit code (forwarded) and how long it took. Interrupted: by
    which signal (SIGINT is Ctrl-C), and whether the program ended on it or had to be
    killed (TensorFlow's preemption notifier catches SIGTERM in multi-worker programs)."""
    shown = " ".join(shlex.join(argv).split())  # one line, whole: the terminal wraps it
    evidence = {"command": list(argv), "returncode": returncode,
                "duration_s": round(duration_s, 3), "interrupted": interrupted,
                "interrupted_by": interrupted_by if interrupted else None}
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


# ---------------------------------------------------------------- memory, Sessions



def _judged_losses(s: Any) -> tuple[list[float], int, str, str] | None:
    """The losses a training run is judged from: its steps', else its epochs' means (None:
    too few of either); with the step count, where they came from and the words for it."""
    losses = [st.loss for st in s.steps if st.loss is not None and math.isfinite(st.loss)]
    count = sum(st.count for st in s.steps)
    if len(losses) >= MIN_JUDGED_STEPS:
        return losses, count, "steps", f"{counted(count, 'step')}"
    losses, count = epoch_losses(s)
    if len(losses) < MIN_JUDGED_EPOCHS:
        return None
    over = (f"{counted(len(losses), 'epoch')} (each epoch's mean loss: the batches were not "
            f"recorded; {counted(count, 'step')})" if count else f"{counted(len(losses), 'epoch')}")
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


def memory(obs: ProcessObservation, nvml_gpus: list[dict[str, Any]] | None,
           proc: str = "") -> Finding:
    """The memory configuration that took effect, beside what NVML saw the GPUs hold."""
    calls = [c for c in obs.config_calls if ("memory_growth" in c.api
             or "logical_device_configuration" in c.api or "virtual_device" in c.api)
             and ":CPU:" not in str(c.args[:1] or c.kwargs.get("device", ""))]  # GPU memory
    gpus = obs.devices.gpus if obs.devices else []
    growth_env = obs.start_env.get("TF_FORCE_GPU_ALLOW_GROWTH")
    sessions = [{k: s.get(k) for k in ("allow_growth", "per_process_gpu_memory_fraction")}
                for s in obs.sessions]
    evidence = {"calls": [{"api": c.api, "args": c.args, "error": c.error} for c in calls],
                "gpus": gpus, "TF_FORCE_GPU_ALLOW_GROWTH": growth_env,
                "session_gpu_options": sessions, "nvml": nvml_gpus}
    failed = [c for c in calls if c.error_type]
    if failed:
        entry = match_crash(failed[0].error_type or "", failed[0].error or "")
        return Finding(f"run.memory{proc}", "fail",
                       f"{failed[0].api} raised {failed[0].error_type}: {failed[0].error}: the "
                       "memory configuration did not take effect", evidence,
                       advice=entry.fix if entry else "",
                       actions=(Action(f"call {failed[0].api.rsplit('.', 1)[-1]} right after "
                                       "importing TensorFlow, before any op runs",
                                       _at(failed[0].caller)),),
                       title=title(f"{failed[0].api.rsplit('.', 1)[-1]} raised "
                                   f"{failed[0].error_type}: memory settings not applied",
                                   "a memory setting raised: not applied"))
    if not gpus:
        return Finding(f"run.memory{proc}", "skip",
                       "no GPU visible to TensorFlow: GPU memory settings do not apply", evidence,
                       title="no GPU: GPU memory settings do not apply")
    parts = []
    for g in gpus:
        limit = g.get("logical_configuration")
        parts.append(f"{g['name'].rsplit('/', 1)[-1]}: memory growth "
                     f"{'on' if g.get('memory_growth') is True else 'off'}"
                     + (f", logical devices {limit}" if limit else ""))
    if growth_env:
        parts.append(f"TF_FORCE_GPU_ALLOW_GROWTH={growth_env}")
    full = []
    for n in nvml_gpus or []:
        used, total = n.get("peak_memory_used_bytes"), n.get("memory_total_bytes")
        if used is not None and total:
            parts.append(f"NVML GPU {n['index']}: peak {used / 2**30:.1f} of "
                         f"{total / 2**30:.1f} GiB")
            if used > MEMORY_FULL_FRACTION * total:
                full.append(n["index"])
    growth = any(g.get("memory_growth") is True for g in gpus) or growth_env == "true"
    if growth and full:
        return Finding(f"run.memory{proc}", "warn",
                       "; ".join(parts) + f": memory growth was on, yet GPU(s) {full} were "
                       "almost full", evidence,
                       title=f"memory growth on, yet {len(full)} GPU(s) almost full",
                       advice="Either the program needs that much, or growth did not take "
                       "effect (configured after initialisation, or another process holds "
                       "the memory: `nvidia-smi`).")
    return Finding(f"run.memory{proc}", "ok", "; ".join(parts), evidence,
                   title=title("; ".join(parts), f"GPU memory: {len(gpus)} GPU(s) configured"))


def session_config(obs: ProcessObservation, proc: str = "") -> Finding | None:
    """A ConfigProto given to tf.compat.v1 Sessions, against the tf.config calls."""
    if not obs.sessions:
        return None
    apis = {c.api.rsplit(".", 1)[-1] for c in obs.config_calls if not c.error_type}
    conflicts = []
    for s in obs.sessions:
        if s.get("visible_device_list") and "set_visible_devices" in apis:
            conflicts.append(f"visible_device_list '{s['visible_device_list']}' and "
                             "tf.config.set_visible_devices both choose GPUs")
        if (s.get("allow_growth") or s.get("per_process_gpu_memory_fraction")) and \
                apis & {"set_memory_growth", "set_logical_device_configuration",
                        "set_virtual_device_configuration"}:
            conflicts.append("gpu_options (allow_growth / memory fraction) and tf.config "
                             "memory calls both configure GPU memory; the first to reach the "
                             "GPUs wins")
        # only a value the program set: without tf.config.set_soft_device_placement, tf.config
        # holds TensorFlow's default (False once eager execution is disabled), which no
        # ConfigProto contradicts (Hands-On ML's ConfigProto(allow_soft_placement=True) did)
        if obs.devices and s.get("allow_soft_placement") is not None and \
                "set_soft_device_placement" in apis and \
                obs.devices.soft_placement is not None and \
                s["allow_soft_placement"] != obs.devices.soft_placement:
            conflicts.append(f"allow_soft_placement={s['allow_soft_placement']} in the "
                             f"ConfigProto, {obs.devices.soft_placement} in tf.config: the "
                             "Session follows its ConfigProto")
    evidence = {"sessions": obs.sessions, "tf_config_calls": sorted(apis),
                "conflicts": conflicts}
    text = f"{len(obs.sessions)} Session(s); ConfigProto: " + "; ".join(
        ", ".join(f"{k}={v}" for k, v in s.items() if v not in (None, {}, "", 0, False))
        or "defaults" for s in obs.sessions)
    if conflicts:
        return Finding(f"run.session-config{proc}", "warn", f"{text}. " + "; ".join(conflicts),
                       evidence, title=f"a Session's ConfigProto conflicts with tf.config "
                       f"({len(conflicts)})",
                       advice="Configure devices in one place: tf.config calls "
                       "right after importing TensorFlow, and a ConfigProto without "
                       "device or memory settings.")
    return Finding(f"run.session-config{proc}", "ok", text, evidence,
                   title=f"{len(obs.sessions)} Session ConfigProto(s), no conflict")


# ---------------------------------------------------------------- profile, crash


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
        for d, b in busy.items()) + f"; in TensorBoard's Profile tab ({_short(p.logdir)})")
    return Finding(f"run.profile{proc}", "ok", text, evidence,
                   title=title(f"traced {steps} of {p.source}{window}",
                               f"traced {steps}{window}", "traced a profiler window"))


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


def _at(frame: dict[str, Any] | None) -> str | None:
    """``file:line`` of the user's frame (None: none known)."""
    return f"{_short(frame['file'])}:{frame['line']}" if frame and frame.get("file") else None


def _crash_title(kind: str, frame: dict[str, Any] | None, entry: str | None) -> str:
    at = _at(frame)
    what = f"{kind} at {at}" if at else kind
    return title(f"crash: {what} ({entry})" if entry else f"crash: {what}", f"crash: {what}",
                 f"crash: {kind}", "the program crashed with a Python exception")


def _crash_actions(frame: dict[str, Any] | None, fix: str | None) -> tuple[Action, ...]:
    """The catalogue's fix at the user's line that raised (none without a known fix)."""
    return (Action(fix, _at(frame)),) if fix else ()


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
