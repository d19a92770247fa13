"""What went wrong with a user's cluster as a whole (the verdict is
gpudiag.verdicts.run.cluster's), each with its status, text, advice and title: a task given
twice or outside the spec, a cluster that never formed, a task that never trained or died,
a chief slow to stop, loopback addresses across machines, tasks not seen.

Pure: the tasks as gpudiag.verdicts.run.cluster_tasks sees them, no I/O.
"""

from __future__ import annotations

from gpudiag.report import Status
from gpudiag.verdicts.cluster import NOT_FORMED_ADVICE
from gpudiag.verdicts.common import title
from gpudiag.verdicts.run.cluster_tasks import BETWEEN_GRAPH, SLOW_STOP_S, Seen, after_last_step

SYNC_STOP_ADVICE = (
    "With tf.train.SyncReplicasOptimizer the chief's MonitoredTrainingSession, as it "
    "closes, waits for its queue-runner threads (sync_token_q) up to the Coordinator's "
    "stop grace period, 120 s by default: pass stop_grace_period_secs (a few seconds) to "
    "tf.compat.v1.train.MonitoredTrainingSession to end sooner.")


WAITING_ADVICE = (
    "A tf.compat.v1 Session waits for every task of the cluster spec: start the task it "
    "waits for, or, when that task has already finished (the chief ended before this "
    "worker was ready: a non-chief checks every 30 s), let each worker see only the ps and "
    "itself: tf.compat.v1.ConfigProto(device_filters=['/job:ps', "
    "'/job:worker/task:%d' % task_index]) passed as MonitoredTrainingSession(config=...).")


DUPLICATE_ADVICE = (
    "Give every process its own task: TF_CONFIG's task.index (or the task_index you pass) "
    "must differ between the processes of one job, and each address may be used once.")


DIED_ADVICE = (
    "Read that task's error (its crash here, its stderr); under MultiWorkerMirroredStrategy "
    "one task stopping stops every other at its next all-reduce. Restart all tasks; "
    "tf.keras.callbacks.BackupAndRestore (or a tf.train.CheckpointManager you restore at "
    "start) lets the restarted job resume where it stopped.")


LOCALHOST_ADVICE = (
    "Put in TF_CONFIG each task's address as the other machines reach it (a host name or "
    "IP, not localhost), the same cluster spec on every machine.")


def _deaths(v: Seen) -> list[tuple[Status, str, str, str]]:
    """Each task that died, with what it died of and how far the others got; tasks that
    all died of the same exception said once, together."""
    died, lost = v.died, v.lost
    tail = f"; TensorFlow reported lost: {', '.join(lost)}" if lost else ""
    crashes = {t.crash for t in died}
    if len(died) > 1 and len(died) == len(v.seen) and len(crashes) == 1 and died[0].crash:
        steps = {t.steps for t in died}
        after = f"{died[0].steps} step(s) each" if len(steps) == 1 else \
            ", ".join(f"{t.task} {t.steps} step(s)" for t in died)
        return [("fail", f"every task died, of the same exception: "
                 f"{', '.join(t.task for t in died)} ({died[0].crash}) after {after}{tail}",
                 DIED_ADVICE, title(f"every task died, of the same exception: "
                                    f"{', '.join(t.task for t in died)}",
                                    f"all {len(died)} tasks died of the same exception"))]
    out: list[tuple[Status, str, str, str]] = []
    for t in died:
        others = [o for o in v.seen if o is not t]
        how = t.crash or "killed: no exit, no Python exception"
        out.append(("fail", f"{t.task} died ({how}) after {t.steps} step(s)"
                    + ("; the others reached: " + ", ".join(
                        f"{o.task} step {o.steps}" for o in others) if others else "")
                    + tail, DIED_ADVICE, title(f"{t.task} died after {t.steps} step(s)",
                                               f"a task died after {t.steps} step(s)")))
    return out


def cluster_problems(v: Seen, scope: str) -> list[tuple[Status, str, str, str]]:
    """What went wrong with the cluster as a whole, each with its status, text, advice
    and title."""
    seen, missing, formed = v.seen, v.missing, v.formed
    problems: list[tuple[Status, str, str, str]] = []
    if v.duplicates:
        problems.append(("fail", "the same task ran twice at once: " + "; ".join(
            f"{k} by " + " and ".join(f"pid {t.pid} on {t.host}" for t in d)
            for k, d in v.duplicates.items()), DUPLICATE_ADVICE,
            title(f"the same task ran twice at once: {', '.join(v.duplicates)}",
                  "the same task ran twice at once")))
    if v.unknown:
        problems.append(("fail", f"{', '.join(v.unknown)} is not in the cluster spec "
                         f"({', '.join(v.expected)})", DUPLICATE_ADVICE,
                         title(f"{', '.join(v.unknown)} is not in the cluster spec",
                               f"{len(v.unknown)} task(s) not in the cluster spec")))
    waiting = [t for t in seen if t.joined == "waiting"]
    stragglers = v.stragglers
    if not formed and (waiting or stragglers):
        absent = stragglers or missing
        problems.append(("fail", "the cluster never formed: "
                         + (f"{', '.join(t.task for t in waiting)} waited for "
                            if waiting else "TensorFlow waited for ")
                         + (", ".join(absent) if absent else "the other tasks")
                         + (f" ({', '.join(n for n in absent if n in missing)} never ran "
                            f"under gpudiag in {scope})" if set(absent) & set(missing)
                            else ""), NOT_FORMED_ADVICE,
                         title(f"the cluster never formed: {len(absent) or 'the other'} "
                               "task(s) never joined", "the cluster never formed")))
    never = v.never
    if never:
        problems.append(("fail", "; ".join(
            f"{t.task} never trained: it waited for {', '.join(t.waiting_for)} (TensorFlow: "
            f"'CreateSession still waiting for response from worker', {t.waiting_lines} "
            "time(s), every 10 s) until it was stopped" for t in never), WAITING_ADVICE,
            title(f"{', '.join(t.task for t in never)} never trained: waited for a worker",
                  f"{len(never)} task(s) never trained: waited for a worker")))
    slow = [t for t in seen if t.sync_replicas and (after_last_step(t) or 0.0) > SLOW_STOP_S]
    if slow and v.kind == BETWEEN_GRAPH:
        problems.append(("warn", "; ".join(
            f"{t.task} ended {after_last_step(t):.0f} s after its last step (the "
            "SyncReplicasOptimizer chief's stop grace period)" for t in slow),
            SYNC_STOP_ADVICE,
            title(f"{slow[0].task} ended {after_last_step(slow[0]):.0f} s after its last "
                  "step", "the chief ended long after its last step")))
    hosts, loopback = v.hosts, v.loopback
    if len(hosts) > 1 and loopback:
        problems.append(("fail", f"TF_CONFIG names {', '.join(loopback)} but the tasks ran "
                         f"on {len(hosts)} machines ({', '.join(hosts)}): a loopback "
                         "address reaches only the machine it is used on",
                         LOCALHOST_ADVICE,
                         f"TF_CONFIG names loopback but the tasks ran on {len(hosts)} machines"))
    problems += _deaths(v)
    if missing and formed:
        problems.append(("warn", f"{', '.join(missing)} not seen in {scope} (the cluster "
                         "formed, so they ran): without gpudiag, with another --logdir, or "
                         "they have not ended yet (the run that ends last reports every "
                         "task)",
                         "Run every task under `gpudiag run --logdir <the same directory>` "
                         "to see them together.",
                         title(f"{', '.join(missing)} not seen in {scope}",
                               f"{len(missing)} task(s) not seen in {scope}",
                               f"{len(missing)} task(s) not seen")))
    return problems
