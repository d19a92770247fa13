"""Verdicts of `gpudiag run` about what could be decided while the program ran: stalls
(gpudiag.inprogram.stallwatch), a loss that became NaN or inf, a loss stuck at
ln(classes). Shown on the terminal as they happened (gpudiag.run.live, with the same
words) and reported at the end. Pure functions of gpudiag.records.run; ``proc`` as in
gpudiag.verdicts.run.process.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag.catalogue import LogMatch
from gpudiag.layout.units import counted
from gpudiag.records.run import ProcessObservation
from gpudiag.report import Action, Finding
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run import throughput as run_throughput
from gpudiag.verdicts.run.progress import LN_TOLERANCE, STUCK_FRACTION

# A loss at ln(classes) is said mid-run once this many steps ran and this many of its last
# losses all sit there.
LIVE_LN_MIN_STEPS = 100
LIVE_LN_WINDOW = 20

_WAITS = {"iterator": "waits for its input: the next batch of its input pipeline",
          "py_function": "waits for a tf.py_function / numpy_function running the "
                         "program's code (in the input pipeline's map or in the step)",
          "collective": "waits in a collective (all-reduce): another worker is behind",
          "step": "waits inside TensorFlow's runtime running the step function (a "
                  "multi-worker step's all-reduce waits there for every worker)",
          "runtime": "waits inside TensorFlow's runtime running the step function (its "
                     "graph, with no Python frame: a tf.data source read inside the step, "
                     "or the computation itself)",
          "server_join": "waits in tf.distribute.Server.join(): this process serves the "
                         "cluster and never returns from join() by design",
          "queue": "waits on a queue (queue.Queue get/put)",
          "thread_join": "waits for another thread to end (Thread.join)",
          "lock": "waits on a lock or condition (threading)",
          "user": "is in the program's code"}
_VIA = {"generator": "the generator of Dataset.from_generator waits at",
        "py_function": "the py_function's code waits at",
        "keras_data": "the data loader's code of the program waits at",
        "thread": "the program's other thread is at"}
_ADVICE = {
    "iterator": "The input pipeline is what stopped: look at the line named (a generator "
                "or a file read waiting); with tf.data, .prefetch() and parallel map hide "
                "slow reads but not one that never returns.",
    "py_function": "A tf.py_function / numpy_function runs Python under the GIL on "
                   "TensorFlow's threads: look at the line named, which has not returned.",
    "collective": "A worker of the cluster did not reach the all-reduce: look at the "
                  "other workers' logs and reports (which step each reached).",
    "step": "The step function was called and has not returned: in a multi-worker job "
            "its all-reduce waits for every worker; the cluster's part of the message "
            "(and run.peers) says which worker is behind and where it waits.",
    "runtime": "The step function was called and has not returned, and no Python code "
               "of the program runs for it: a tf.data source that blocks (a file, a "
               "socket, a named pipe) read inside the step, or a step far slower than "
               "the ones before; the thread stacks in the evidence show every thread.",
    "server_join": "server.join() returns only when the process is stopped: a parameter "
                   "server's task does this by design; a worker should build its graph "
                   "and train instead of joining.",
    "queue": "The program waits on a queue that nothing fills (or empties): look at "
             "the thread that should put to it (the stacks in the evidence).",
    "thread_join": "The program waits for a thread that does not end: the stacks in the "
                   "evidence show where that thread is.",
    "lock": "A thread of the program waits on a lock or condition: the stacks in the "
            "evidence show which thread holds it.",
    "user": "The program's own code at the line named did not return.",
}


def _at(frame: dict[str, Any]) -> str:
    return (f"{Path(frame['file']).name}:{frame['line']} in {frame['function']}() "
            f"`{frame.get('code', '')}`")


def describe_stall(event: dict[str, Any]) -> str:
    """One line: how long, which loop, where the step waits (the program's own line: the
    one that waits, then the one that called the step)."""
    where = event.get("where") or {}
    loop = event.get("loop") or {}
    name = (f"tf.function {loop['function']}" if loop.get("function") else
            f"Session.run #{loop['group']}" if loop.get("group") is not None else
            "Model.fit" if event.get("loop_kind") == "fit_steps" else "the loop")
    if event.get("since") == "cluster_joined" and not event.get("steps"):
        head = (f"no step has finished in the {event.get('waited_s', 0):.1f} s since it "
                "joined the cluster")
    else:
        head = f"no step of {name} has finished for {event.get('waited_s', 0):.1f} s"
    text = (f"{head} (stall timeout {event.get('timeout_s', 0):.1f} s, {event.get('steps', 0)} "
            f"steps so far): the step {_WAITS.get(str(where.get('kind')), 'waits')}")
    waiting, frame = where.get("waiting"), where.get("frame")
    if waiting:
        via = _VIA.get(str(where.get("via")), "the pipeline's code waits at")
        text += f"; {via} {_at(waiting)}"
        if frame:
            text += f" (the step was called at {_at(frame)})"
    elif frame:
        text += f"; at {_at(frame)}"
    return text


def stall(obs: ProcessObservation, proc: str = "", log: Sequence[LogMatch] = ()) -> Finding:
    """Whether a loop stopped stepping for longer than the stall timeout, and where. A
    stall inside the step's runtime while XLA compiled for minutes (the log's "Very slow
    compile?" line, catalogue entry xla-slow-compile) is named as compiling, not hung."""
    fid = f"run.stall{proc}"
    if not obs.stalls:
        if not any(s.steps for s in obs.series):
            return Finding(fid, "skip", run_throughput.unseen_fit_batches(obs)
                           or "no training loop ran: no step to wait for",
                           title="no training step seen: no stall to watch for")
        return Finding(fid, "ok", "no stall: every loop kept finishing steps within its "
                       "stall timeout", title="no stall: every loop kept finishing steps")
    parts = []
    for e in obs.stalls:
        text = describe_stall(e)
        text += (f"; it stepped again after {e['ended_after_s']:.1f} s"
                 if e.get("ended_after_s") is not None else "; it never stepped again")
        parts.append(text)
    kind = str((obs.stalls[0].get("where") or {}).get("kind"))
    evidence = {"stalls": [{k: e.get(k) for k in ("waited_s", "timeout_s", "steps", "where",
                                                  "ended_after_s", "threads")}
                           for e in obs.stalls]}
    first = obs.stalls[0]
    frame = (first.get("where") or {}).get("waiting") or (first.get("where") or {}).get("frame")
    waited = f"{len(obs.stalls)} stall(s), the first {first.get('waited_s', 0):.1f} s"
    at = f", waiting at {Path(frame['file']).name}:{frame['line']}" if frame else ""
    compiling = xla_compiling(obs, log, first) if kind in ("runtime", "step") else None
    if compiling is not None:
        entry = next(m.entry for m in log if m.entry.id == "xla-slow-compile")
        return Finding(fid, "warn", f"{compiling}; " + " | ".join(parts), evidence,
                       advice=entry.fix,
                       title=title(f"{waited}: XLA compiling, not hung",
                                   "XLA compiling for minutes, not hung"))
    return Finding(fid, "warn", f"{len(obs.stalls)} stall(s): " + " | ".join(parts),
                   evidence, advice=_ADVICE.get(kind, _ADVICE["user"]),
                   title=title(f"{waited}{at}", waited))


_ABSL_TIME = re.compile(r"^[IWEF]\d{4} \d\d:\d\d:(?P<unix>\d{9,}\.\d+)\s")
_DURATION = re.compile(r"The operation took (?:(?P<h>\d+)h)?(?:(?P<m>\d+)m)?"
                       r"(?:(?P<s>[\d.]+)s)?")


def compile_window(took_line: str) -> tuple[float, float] | None:
    """When XLA's slow compilation ran (Unix s), from slow_operation_alarm.cc's "The
    operation took 3m2.369747s" line with absl's prefix (TensorFlow 2.21's ``E0000
    00:00:1795935047.079104``); None where the line does not say."""
    end, took = _ABSL_TIME.search(took_line), _DURATION.search(took_line)
    if end is None or took is None or not any(took.groupdict().values()):
        return None
    seconds = (int(took["h"] or 0) * 3600 + int(took["m"] or 0) * 60
               + float(took["s"] or 0))
    return float(end["unix"]) - seconds, float(end["unix"])


def xla_compiling(obs: ProcessObservation, log: Sequence[LogMatch],
                  stall_event: dict[str, Any]) -> str | None:
    """Why a stall inside the step's runtime was XLA compiling, from the log's own words
    (None: the log has no "Very slow compile?" line, or its compilation's time, where the
    log gives it, did not overlap the stall)."""
    slow = next((m for m in log if m.entry.id == "xla-slow-compile"), None)
    if slow is None:
        return None
    took = next((m.first for m in log if m.entry.id == "xla-slow-operation-took"), None)
    window = compile_window(took) if took else None
    t, waited = stall_event.get("t"), stall_event.get("waited_s") or 0.0
    overlap = None
    if window is not None and isinstance(t, int | float):
        ended = stall_event.get("ended_after_s")
        stall_end = t - waited + ended if isinstance(ended, int | float) else math.inf
        overlap = window[0] < stall_end and window[1] > t - waited
        if not overlap:
            return None
    jit = any(s.facts.get("jit_compile") is True for s in obs.series)
    when = "while the step waited" if overlap else "(when, against the stall, not known)"
    return (f"XLA compiled one module for more than 2 minutes {when} (the log: `"
            + slow.first[:200] + "`" + (f"; `{took[:120]}`" if took else "") + "): a step "
            "that compiles (" + ("the step function is jit_compile: " if jit else "")
            + "its first call, or a new input shape such as a last partial batch), not a "
            "hang")


def stuck_at_ln_classes(label: str, first: float, recent: Sequence[float], steps: int,
                        classes: int | None, classes_from: str) -> str | None:
    """Mid-run: the loss has stayed at ln(classes) (uniform predictions) for the last
    LIVE_LN_WINDOW losses after at least LIVE_LN_MIN_STEPS steps and has not fallen from
    its first value; the words said then, else None. Only with the class count from the
    program (gpudiag.run.classcount), as run.learning judges it at the end."""
    if not classes or classes < 2 or steps < LIVE_LN_MIN_STEPS or \
            len(recent) < LIVE_LN_WINDOW:
        return None
    ln = math.log(classes)
    window = list(recent)[-LIVE_LN_WINDOW:]
    if not all(abs(x - ln) <= LN_TOLERANCE * ln for x in window) or \
            window[-1] < STUCK_FRACTION * first:
        return None
    return (f"the loss of {label} has stayed at ln {classes} = {ln:.4f} over "
            f"{counted(steps, 'step')} "
            f"(its last {len(window)} values {min(window):.4f} to {max(window):.4f}, the "
            f"first {first:.4f}): the model predicts all {classes} classes alike "
            f"({classes_from})")


def finite_loss(obs: ProcessObservation, proc: str = "") -> Finding:
    """A loss that became NaN or inf: training diverged (every later update is lost). A fit
    whose batches were not seen (tf_keras under ParameterServerStrategy) by its epochs'."""
    fid = f"run.finite-loss{proc}"
    bad: list[dict[str, Any]] = []
    for s in obs.series:
        first = next((st for st in s.steps if st.loss is not None and
                      not math.isfinite(st.loss)), None)
        epoch = next((n for n, e in enumerate(s.epochs) if isinstance(e.get("loss"), float)
                      and not math.isfinite(e["loss"])), None)
        if first is not None:
            bad.append({"series": s.label, "step": first.index, "loss": str(first.loss),
                        "at_unix_s": first.start_unix_s})
        elif epoch is not None:
            bad.append({"series": s.label, "step": f"the end of epoch {epoch + 1}",
                        "loss": str(s.epochs[epoch]["loss"]), "at_unix_s": None})
    if bad:
        return Finding(fid, "fail", "; ".join(
            f"the loss of {b['series']} is {b['loss']} at step {b['step']}" for b in bad)
            + ": training diverged", {"loops": bad},
            title=title(f"training diverged: the loss is {bad[0]['loss']} at step "
                        f"{bad[0]['step']}", f"training diverged: the loss is {bad[0]['loss']}",
                        "training diverged: the loss is not finite"),
            actions=(Action("lower the learning rate, or clip the gradients (clipnorm=1.0)"),),
            advice="Lower the learning rate, clip gradients (clipnorm=1.0), check the "
                   "inputs for NaN/inf (tf.debugging.check_numerics), and use a loss "
                   "with from_logits=True rather than log of a softmax.")
    if not any(st.loss is not None for s in obs.series for st in s.steps) and \
            not any("loss" in e for s in obs.series for e in s.epochs):
        return Finding(fid, "skip", "no loss was observed", title="no loss was observed")
    return Finding(fid, "ok", "every observed loss was finite",
                   title="every observed loss was finite")
