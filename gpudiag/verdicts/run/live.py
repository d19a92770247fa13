"""Verdicts of `gpudiag run` about what could be decided while the program ran: stalls
(gpudiag.inprogram.stallwatch), a loss that became NaN or inf, a loss stuck at
ln(classes). Shown on the terminal as they happened (gpudiag.run.live, with the same
words) and reported at the end. Pure functions of gpudiag.records.run; ``proc`` as in
gpudiag.verdicts.run.process.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gpudiag.records.run import ProcessObservation
from gpudiag.report import Finding
from gpudiag.verdicts.run import throughput as run_throughput
from gpudiag.verdicts.run.progress import LN_TOLERANCE, STUCK_FRACTION

# A loss at ln(classes) is said mid-run once this many steps ran and this many of its last
# losses all sit there.
LIVE_LN_MIN_STEPS = 100
LIVE_LN_WINDOW = 20

_WAITS = {"iterator": "waits for the next batch of its input pipeline",
          "collective": "waits in a collective (all-reduce): another worker is behind",
          "step": "waits inside TensorFlow's runtime running the step function (a "
                  "multi-worker step's all-reduce waits there for every worker)",
          "lock": "waits on a lock, queue or thread", "user": "is in the program's code"}
_ADVICE = {
    "iterator": "The input pipeline is what stopped: look at the line named (a generator "
                "or a file read waiting); with tf.data, .prefetch() and parallel map hide "
                "slow reads but not one that never returns.",
    "collective": "A worker of the cluster did not reach the all-reduce: look at the "
                  "other workers' logs and reports (which step each reached).",
    "step": "The step function was called and has not returned: in a multi-worker job "
            "its all-reduce waits for every worker; the cluster's part of the message "
            "(and run.peers) says which worker is behind and where it waits.",
    "lock": "A thread of the program waits on a lock, queue or another thread: the stacks "
            "in the evidence show which.",
    "user": "The program's own code at the line named did not return.",
}


def describe_stall(event: dict[str, Any]) -> str:
    """One line: how long, which loop, where the step waits (the program's own line)."""
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
    for key, label in (("waiting", "the pipeline's code waits at"), ("frame", "at")):
        frame = where.get(key)
        if frame:
            text += (f"; {label} {Path(frame['file']).name}:{frame['line']} in "
                     f"{frame['function']}() `{frame.get('code', '')}`")
    return text


def stall(obs: ProcessObservation, proc: str = "") -> Finding:
    """Whether a loop stopped stepping for longer than the stall timeout, and where."""
    fid = f"run.stall{proc}"
    if not obs.stalls:
        if not any(s.steps for s in obs.series):
            return Finding(fid, "skip", run_throughput.unseen_fit_batches(obs)
                           or "no training loop ran: no step to wait for")
        return Finding(fid, "ok", "no stall: every loop kept finishing steps within its "
                       "stall timeout")
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
    return Finding(fid, "warn", f"{len(obs.stalls)} stall(s): " + " | ".join(parts),
                   evidence, advice=_ADVICE.get(kind, _ADVICE["user"]))


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
    return (f"the loss of {label} has stayed at ln {classes} = {ln:.4f} over {steps} steps "
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
            advice="Lower the learning rate, clip gradients (clipnorm=1.0), check the "
                   "inputs for NaN/inf (tf.debugging.check_numerics), and use a loss "
                   "with from_logits=True rather than log of a softmax.")
    if not any(st.loss is not None for s in obs.series for st in s.steps) and \
            not any("loss" in e for s in obs.series for e in s.epochs):
        return Finding(fid, "skip", "no loss was observed")
    return Finding(fid, "ok", "every observed loss was finite")
