"""Verdicts of multi-worker runs (`gpudiag scaling --workers`, `gpudiag worker`).

Evidence, as plain data built by gpudiag/cluster/judge.py: per cluster configuration a
``row`` (how the run ended, each task's last step and exit, the stragglers and dead
tasks TensorFlow named, each worker's own measurements, the chief's losses), the
TensorFlow messages recognised in the tasks' logs, and the addresses the tasks listened
on. No TensorFlow, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpudiag.layout.units import counted, duration
from gpudiag.layout.units import share as pct
from gpudiag.report import Finding, Status
from gpudiag.verdicts.common import title

SEVERITY_STATUS: dict[str, Status] = {"info": "ok", "warn": "warn", "fail": "fail"}
NOT_FORMED_ADVICE = (
    "Each task listed in TF_CONFIG must be started, with its own task.index; every address "
    "must be the one the other machines reach (localhost only when all tasks share one "
    "machine); the ports must be open between the machines; TF_CONFIG must be set before "
    "the strategy is created.")


def _rate(x: float | None) -> str:
    return "n/a" if x is None else f"{x:,.0f}"


def _ms(x: float | None) -> str:
    return duration(x)


def _steps(tasks: Sequence[dict[str, Any]]) -> str:
    return ", ".join(f"{t['task']} step {t['last_step'] if t['last_step'] is not None else 0}"
                     for t in tasks)


def _formed_title(row: dict[str, Any]) -> str:
    n, steps = row["n_workers"], row.get("steps")
    restarted = (f" after {row['restarts_used']} restart(s)" if row.get("restarts_used")
                 else "")
    return title(f"{row['config']}: {n} worker(s) formed a cluster, ran {counted(steps, 'step')}"
                 f"{restarted}", f"{n} worker(s) formed a cluster and ran {counted(steps, 'step')}"
                 f"{restarted}")


def cluster_run(row: dict[str, Any]) -> Finding:
    """How one cluster configuration ended: formed, finished, restarted, or why not."""
    config, outcome = row["config"], row["outcome"]
    check_id = f"cluster.run.{config}"
    tasks = row["tasks"]
    final = [t for t in tasks if t["attempt"] == max(x["attempt"] for x in tasks)]
    evidence = {k: row.get(k) for k in ("config", "mode", "n_workers", "outcome", "failed",
                                         "restarts_used", "resumed_from", "form_timeout_s",
                                         "timeout_s", "stopped_within_s")}
    evidence["tasks"] = tasks if outcome != "complete" else [
        {k: v for k, v in t.items() if k != "stderr_tail"} for t in tasks]
    dead = sorted((t for t in tasks if t["task"] in row["failed"] and not t["ok"]
                   and t["ended"] != "stopped"),
                  key=lambda t: (t["attempt"], row["failed"].index(t["task"])))
    if outcome == "complete":
        steps = row.get("steps")
        n = row["n_workers"]
        text = (f"{config}: {n} worker{'s' if n != 1 else ''} formed a cluster and ran "
                f"{counted(steps, 'step')}")
        if row.get("restarts_used") and row["mode"] == "ps":
            lost = "; ".join(f"{t['task']} {t['exit']} at step {t['last_step'] or 0}"
                             for t in dead)
            text += (f"; {lost}: the coordinator went on with the other workers (TensorFlow "
                     "re-runs a lost worker's steps) and gpudiag restarted its server")
        elif row.get("restarts_used"):
            lost = "; ".join(f"{t['task']} {t['exit']} at step {t['last_step'] or 0}"
                             for t in dead)
            resumed = row.get("resumed_from")
            text += (f"; after {lost}, the cluster restarted ({row['restarts_used']} restart"
                     f"{'s' if row['restarts_used'] != 1 else ''}) and "
                     + (f"resumed from its backup at step {resumed}" if resumed
                        else "started over (no backup had been made yet)"))
        return Finding(check_id, "ok", text, evidence, title=_formed_title(row))
    if outcome == "never-formed":
        waiting = row.get("stragglers") or []
        missing = [t["task"] for t in final if not t["started"]]
        why = []
        if missing:
            why.append(f"{', '.join(missing)} never started")
        if waiting:
            why.append(f"TensorFlow's coordination service was still waiting for "
                       f"{', '.join(waiting)}")
        for t in dead:
            why.append(f"{t['task']} {t['exit']}: {t['error'] or 'see its stderr'}")
        text = (f"{config}: the cluster never formed within {row['form_timeout_s']:g} s"
                + (f" ({'; '.join(why)})" if why else "") + "; every task was stopped")
        return Finding(check_id, "fail", text, evidence, advice=NOT_FORMED_ADVICE,
                       title=title(f"{config}: the cluster never formed within "
                                   f"{row['form_timeout_s']:g} s", "the cluster never formed"))
    if outcome == "task-failed":
        first = dead[0] if dead else None
        lost = (f"{first['task']} {first['exit']} at step {first['last_step'] or 0}"
                if first else "a task failed")
        if first and first["ended"] == "killed-by-drill":
            lost = (f"{first['task']} was killed (SIGKILL, --fault drill) at step "
                    f"{first['last_step']}")
        within = row.get("stopped_within_s")
        then = [f"{t['task']} {t['exit']}" for t in dead[1:] if t["attempt"] == first["attempt"]] \
            if first else []
        text = (f"{config}: {lost}; " + (f"then {', '.join(then)}; " if then else "")
                + "every task had ended"
                + (f" {within:.1f} s later" if within is not None else "")
                + f" (last steps: {_steps(final)})")
        if row.get("restarts_used"):
            text += f"; {row['restarts_used']} restart(s) did not bring it to the end"
        if first:
            evidence["stderr_tail_of_failed"] = first.get("stderr_tail")
        return Finding(check_id, "fail", text, evidence,
                       title=title(f"{config}: {lost}", f"{config}: a task failed",
                                   "a task of the cluster failed"),
                       advice=f"Read {first['task'] if first else 'the failed task'}'s stderr "
                              "(children/ in the run directory); a lost worker stops "
                              "MultiWorkerMirroredStrategy, so restart the cluster "
                              "(--restarts N) and it resumes from its backups.")
    return _timed_out(check_id, row, final, evidence)


def _timed_out(check_id: str, row: dict[str, Any], final: list[dict[str, Any]],
               evidence: dict[str, Any]) -> Finding:
    config, limit = row["config"], row["timeout_s"]
    return Finding(check_id, "fail",
                   f"{config}: did not finish within {limit:g} s and was stopped "
                   f"(last steps: {_steps(final)})", evidence,
                   title=title(f"{config}: did not finish within {limit:g} s",
                               f"did not finish within {limit:g} s"),
                   advice="Give it more time (--timeout) or fewer --steps; if the steps "
                          "stopped advancing, a task hangs: read the tasks' stderr.")


def _pair(rows: Sequence[dict[str, Any]]) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    one = next((r for r in rows if r["n_workers"] == 1), None)
    many = max((r for r in rows if r["n_workers"] > 1), key=lambda r: r["n_workers"],
               default=None)
    return one, many


def _efficiency(one: dict[str, Any] | None, many: dict[str, Any] | None) -> float | None:
    if not one or not many or not one.get("total_examples_per_s") \
            or not many.get("total_examples_per_s"):
        return None
    return float(many["total_examples_per_s"] / (many["n_workers"] * one["total_examples_per_s"]))


def cluster_scaling(mode: str, batch: int, rows: Sequence[dict[str, Any]]) -> Finding:
    """1 worker beside N workers at one batch per worker: each worker's measured
    examples/s, their sum (never one worker's times N), the time in collectives."""
    check_id = f"cluster.scaling.{mode}-b{batch}"
    one, many = _pair(rows)
    evidence = {"mode": mode, "batch_per_worker": batch, "rows": [
        {k: r.get(k) for k in ("config", "n_workers", "total_examples_per_s", "workers",
                               "step_s", "comm_s_per_step", "device_kind", "shared_machine",
                               "busy_fraction")} for r in rows]}
    if many is None or not many.get("workers"):
        return Finding(check_id, "skip", f"{mode}, batch {batch}: no multi-worker run "
                       "finished to measure", evidence,
                       title=f"{mode}, batch {batch}: no multi-worker run finished")
    parts = [f"{w['task']} {_rate(w['examples_per_s'])}" for w in many["workers"]]
    text = (f"{mode}, batch {batch} per worker: {many['n_workers']} workers measured "
            f"{' + '.join(parts)} = {_rate(many['total_examples_per_s'])} examples/s")
    eff = _efficiency(one, many)
    evidence["efficiency"] = eff
    if one is not None and one.get("total_examples_per_s"):
        text += (f"; 1 worker {_rate(one['total_examples_per_s'])} examples/s"
                 + (f" (efficiency {eff:.2f})" if eff is not None else ""))
    short = (f"{mode}, batch {batch}: {many['n_workers']} workers "
             f"{_rate(many['total_examples_per_s'])} examples/s"
             + (f", efficiency {eff:.2f}" if eff is not None else ""))
    comm = many.get("comm_s_per_step")
    if comm is not None and many.get("step_s"):
        text += (f"; collective ops {_ms(comm)} of a {_ms(many['step_s'])} step "
                 "(profiled steps)")
    busy = many.get("busy_fraction")
    if busy is not None:
        text += (f"; each worker was busy {pct(busy)} of its span (one coordinator dispatches "
                 "every step)")
    if many.get("device_kind") == "cpu" and many.get("shared_machine"):
        return Finding(check_id, "warn", text + ". Not meaningful as a speed-up: the workers "
                       "are processes sharing this machine's CPU cores", evidence,
                       title=title(f"{short}; shared cores, not a speed-up",
                                   "workers share this machine's cores: not a speed-up"),
                       advice="Run the workers on separate machines or GPUs (gpudiag "
                              "worker, docs/cluster.md) to measure scaling.")
    if eff is not None and eff < 0.8:
        return Finding(check_id, "warn", text, evidence,
                       title=title(short, f"efficiency {eff:.2f}"),
                       advice="Communication costs more than it gains at this batch: try a "
                              "larger batch per worker, and check the interconnect.")
    return Finding(check_id, "ok", text, evidence,
                   title=title(short, f"{many['n_workers']} workers measured"))


def batch_payoff(mode: str, rows: Sequence[dict[str, Any]]) -> Finding:
    """The same worker counts at two batches per worker: a larger batch amortises the
    fixed per-step cost of communication."""
    check_id = f"cluster.batch.{mode}"
    batches = sorted({r["batch_per_worker"] for r in rows})
    points = []
    for b in batches:
        one, many = _pair([r for r in rows if r["batch_per_worker"] == b])
        step, comm = (many or {}).get("step_s"), (many or {}).get("comm_s_per_step")
        points.append({"batch_per_worker": b, "efficiency": _efficiency(one, many),
                       "step_s": step, "comm_s_per_step": comm,
                       "comm_fraction": comm / step if comm is not None and step else None})
    evidence = {"mode": mode, "points": points}
    usable = [p for p in points if p["efficiency"] is not None]
    if len(usable) < 2:
        return Finding(check_id, "skip", f"{mode}: fewer than two batch sizes finished with "
                       "1 and N workers", evidence,
                       title=f"{mode}: fewer than two batch sizes finished")
    small, large = usable[0], usable[-1]

    def say(p: dict[str, Any]) -> str:
        share = (f", collectives {pct(p['comm_fraction'])} of a step"
                 if p["comm_fraction"] is not None else "")
        return f"batch {p['batch_per_worker']}: efficiency {p['efficiency']:.2f}{share}"

    text = f"{mode}: {say(small)}; {say(large)}"
    if large["efficiency"] > small["efficiency"]:
        cost = ("the all-reduce costs the same per step whatever the batch" if mode == "sync"
                else "a step's exchange with the parameter servers and its dispatch by the "
                "coordinator cost the same whatever the batch")
        text += f": the larger batch pays for the communication better ({cost})"
    else:
        text += ": the larger batch did not improve efficiency here"
    return Finding(check_id, "ok", text, evidence, title=(
        f"{mode}: efficiency {small['efficiency']:.2f} at batch {small['batch_per_worker']}, "
        f"{large['efficiency']:.2f} at {large['batch_per_worker']}"))


def sync_vs_ps(sync: dict[str, Any] | None, ps: dict[str, Any] | None) -> Finding:
    """The same workers and batch under both modes: throughput, loss, and the trade-off."""
    check_id = "cluster.sync-vs-ps"
    evidence = {"sync": sync, "ps": ps}
    if not sync or not ps or not sync.get("total_examples_per_s") \
            or not ps.get("total_examples_per_s"):
        return Finding(check_id, "skip", "sync and ps did not both finish with the same "
                       "workers and batch", evidence,
                       title="sync and ps did not both finish with the same workers")
    s_rate, p_rate = sync["total_examples_per_s"], ps["total_examples_per_s"]

    def loss(r: dict[str, Any]) -> str:
        return "n/a" if r.get("final_loss") is None else f"{r['final_loss']:.3f}"

    text = (f"{sync['n_workers']} workers, batch {sync['batch_per_worker']}: sync "
            f"{_rate(s_rate)} examples/s, final loss {loss(sync)}, eval accuracy "
            f"{sync.get('eval_accuracy') or 0:.2f}; ps {_rate(p_rate)} examples/s, final loss "
            f"{loss(ps)}, eval accuracy {ps.get('eval_accuracy') or 0:.2f}. ")
    why = []
    if sync.get("comm_s_per_step") is not None and sync.get("step_s"):
        why.append(f"sync waits every step for the slowest worker and the all-reduce "
                   f"({_ms(sync['comm_s_per_step'])} of a {_ms(sync['step_s'])} step) but "
                   "every update uses the current weights")
    busy = ps.get("busy_fraction")
    if busy is not None:
        why.append(f"ps never waits for another worker, but its gradients may be computed on "
                   f"weights a few updates old, and one coordinator dispatches every step: "
                   f"its workers were busy {pct(busy)} of the time")
    faster = "ps" if p_rate > s_rate else "sync"
    text += f"{faster} was faster here ({max(s_rate, p_rate) / min(s_rate, p_rate):.2f}x)"
    text += (": " + "; ".join(why) + ".") if why else "."
    return Finding(check_id, "ok", text, evidence, title=(
        f"{faster} was {max(s_rate, p_rate) / min(s_rate, p_rate):.2f}x faster: "
        f"sync {_rate(s_rate)}, ps {_rate(p_rate)} examples/s"))


def tf_messages(seen: Sequence[dict[str, Any]], *, never_formed: bool,
                recovered: Sequence[str] = (), completed: Sequence[str] = ()) -> list[Finding]:
    """One finding per TensorFlow message recognised (gpudiag.cluster.messages), with its
    meaning and fix. ``seen``: {id, severity, meaning, fix, count, first, tasks} where a
    task is ``<config>/<task>``. The coordination service's "waiting for tasks" is
    normal at start-up and reported only when the cluster never formed. A failure
    printed only in configurations that finished anyway is not a fail: a warn where they
    got there by restarting (``recovered``), ok where they ran straight through
    (``completed``: a peer's connection closing as the tasks shut down)."""
    out = []
    for s in seen:
        if s["id"] == "cluster-waiting-for-tasks" and not never_formed:
            continue
        status = SEVERITY_STATUS.get(s["severity"], "warn")
        if s["id"] == "cluster-waiting-for-tasks":
            status = "warn"  # the cluster never formed: the tasks it waited for are why
        configs = {t.split("/")[0] for t in s["tasks"]}
        note = ""
        if status == "fail" and configs <= set(completed):
            status, note = "ok", " It did not stop the run: every step completed."
        elif status == "fail" and configs <= set(completed) | set(recovered):
            status, note = "warn", " The run recovered from it."
        out.append(Finding(f"cluster.tf-message.{s['id']}", status,
                           f"TensorFlow said, in {', '.join(s['tasks'])} ({s['count']}x): "
                           f"\"{s['first'][:240]}\". {s['meaning']}{note}", dict(s),
                           advice=s["fix"], title=_message_title(s)))
    return out


def _message_title(s: dict[str, Any]) -> str:
    meaning = str(s["meaning"]).split(". ")[0].rstrip(".")
    return title(f"TensorFlow said ({s['count']}x): {meaning}",
                 f"TensorFlow said {s['id']} ({s['count']}x)",
                 f"a TensorFlow message ({s['count']}x)")


def listening(tasks: Sequence[dict[str, Any]], tf_config_loopback: bool) -> Finding:
    """Where the tasks' TensorFlow servers listened, beside what TF_CONFIG asked."""
    known = [t for t in tasks if t.get("listening") is not None]
    evidence = {"tasks": [{"task": t["task"], "listening": t.get("listening")} for t in tasks],
                "tf_config_loopback": tf_config_loopback}
    if not known:
        return Finding("cluster.listen", "skip", "the tasks' listening sockets could not be "
                       "read (/proc unavailable, or no task came up)", evidence,
                       title="the tasks' listening sockets could not be read")
    exposed = sorted({a for t in known for a in t["listening"] if not a.startswith("127.")
                      and not a.startswith("[::1]")})
    listing = "; ".join(dict.fromkeys(f"{t['task']} {', '.join(t['listening']) or 'nothing'}"
                                      for t in known))
    if exposed and tf_config_loopback:
        return Finding("cluster.listen", "warn",
                       f"TF_CONFIG names only 127.0.0.1 and the tasks talked over loopback, "
                       f"but TensorFlow's servers listened on every interface ({listing}): "
                       "TensorFlow binds 0.0.0.0:<port> whatever host TF_CONFIG names and "
                       "has no option to change it", evidence,
                       title=f"TensorFlow's servers listened on every interface ({len(exposed)})",
                       advice="On a shared network, block these ports from outside (a "
                              "firewall) while the run lasts; gpudiag itself opens no "
                              "listening socket here.")
    return Finding("cluster.listen", "ok", f"listening: {listing}", evidence,
                   title=title(f"listening: {listing}",
                               f"{len(known)} task(s)' servers listened as TF_CONFIG says"))
