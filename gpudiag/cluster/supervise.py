"""Run a cluster's tasks as child processes here: start, watch, stop; bounded, nothing left.

Each task is ``python -m gpudiag.procs.child gpudiag.probes.cluster`` with its TF_CONFIG in
the environment, started by gpudiag.procs (its own process group, watched by the
reaper), its files in ``children/<task_child_name>/`` like any probe child. The
supervisor follows each task's stdout for its GPUDIAG-CLUSTER and GPUDIAG-STEP lines
(gpudiag/layout/__init__.py) and decides, every POLL_S:

- formed: every task said ``formed`` (its strategy or server is up). Not within
  ``form_timeout_s`` of the attempt's start: the cluster never formed; stop everything;
- complete: sync, every trainer exited 0; ps, the coordinator exited 0 (the servers are
  then stopped, as their job is done);
- a task failed before the cluster formed: it never will; stop everything at once;
- a task failed (non-zero exit, a signal, or killed by the ``--fault`` drill): the others
  get ``grace_s`` to notice and end by themselves (TensorFlow's heartbeats and
  collective timeouts), then are stopped. With restarts left the whole cluster starts
  again with the same TF_CONFIGs and resumes from its backups; in ps mode a lost
  *worker* server is restarted alone, the coordinator goes on (TensorFlow re-runs its
  steps elsewhere and takes it back);
- the whole configuration's ``timeout_s`` is spent: stop everything.

Stopping a TensorFlow task: SIGTERM to every group at once (TensorFlow catches it for
its preemption notifier and goes on), then SIGKILL through procs.stop_group. What it runs
and how that went are gpudiag.cluster.clusterrun's records.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from gpudiag import layout
from gpudiag.cluster import sockets
from gpudiag.cluster.clusterrun import ClusterRun, Fault, Limits, TaskOutcome, TaskSpec
from gpudiag.procs import group as procs
from gpudiag.procs import stops
from gpudiag.procs.exitstatus import describe_exit
from gpudiag.procs.runner import tail_lines
from gpudiag.records.cluster import WorkerResult

POLL_S = 0.2
TERM_WAIT_S = 1.0
KILL_SEQUENCE: tuple[tuple[int | None, float], ...] = ((signal.SIGKILL, 5.0),)
PROBE = "gpudiag.probes.cluster"


@dataclass
class _Live:
    spec: TaskSpec
    attempt: int
    dir: Path
    proc: subprocess.Popen[bytes] | None
    started: float
    offset: int = 0
    pending: str = ""
    formed: bool = False
    last_step: int | None = None
    resumed_from: int | None = None
    ended_by: str = "exit"
    ended_at: float | None = None
    listening: list[str] | None = None


def _spawn(run_dir: Path, config_name: str, spec: TaskSpec, attempt: int,
           clock: Callable[[], float]) -> _Live:
    cdir = layout.child_dir(run_dir, layout.task_child_name(config_name, spec.name, attempt))
    config_path, result_path = cdir / layout.CONFIG_JSON, cdir / layout.RESULT_JSON
    config_path.write_text(json.dumps(spec.config.to_dict(), indent=2), encoding="utf-8")
    result_path.unlink(missing_ok=True)
    env = {**os.environ, "TF_CONFIG": spec.tf_config, "TF_CPP_MIN_LOG_LEVEL": "0",
           "PYTHONFAULTHANDLER": "1", **spec.env}  # a crash leaves its Python stack
    argv = [sys.executable, "-m", "gpudiag.procs.child", PROBE, str(config_path), str(result_path)]
    with (cdir / layout.STDOUT_TXT).open("wb") as out, (cdir / layout.STDERR_TXT).open("wb") as err:
        proc = procs.spawn(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=err, env=env)
    return _Live(spec, attempt, cdir, proc, clock())


def _follow(task: _Live) -> None:
    """Read what the task printed since the last poll."""
    try:
        with (task.dir / layout.STDOUT_TXT).open("rb") as f:
            f.seek(task.offset)
            data = f.read()
    except OSError:
        return
    task.offset += len(data)
    text = task.pending + data.decode("utf-8", "replace")
    lines = text.split("\n")
    task.pending = lines.pop()
    for line in lines:
        progress = layout.parse_step_line(line)
        if progress is not None:
            task.last_step = progress.step
            continue
        event = layout.parse_cluster_line(line)
        if event is None:
            continue
        if event[0] == layout.CLUSTER_FORMED:
            task.formed = True
        elif event[0] == layout.CLUSTER_RESUMED and event[1].isdigit():
            task.resumed_from = int(event[1])


def _stop(tasks: Sequence[_Live], clock: Callable[[], float]) -> None:
    """Every task still running: SIGTERM all, a moment, then SIGKILL each group."""
    running = [t for t in tasks if t.proc is not None and t.proc.poll() is None]
    for t in running:
        assert t.proc is not None
        procs.signal_group(t.proc, signal.SIGTERM)
        if t.ended_by == "exit":
            t.ended_by = "stopped"
    deadline = time.monotonic() + TERM_WAIT_S
    for t in running:
        assert t.proc is not None
        with contextlib.suppress(subprocess.TimeoutExpired):
            t.proc.wait(timeout=max(0.0, deadline - time.monotonic()))
    for t in tasks:
        if t.proc is not None:
            procs.stop_group(t.proc, KILL_SEQUENCE)
            if t.ended_at is None:
                t.ended_at = clock()


def _read_result(task: _Live) -> tuple[WorkerResult | None, str | None, str | None]:
    try:
        payload = json.loads((task.dir / layout.RESULT_JSON).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None, None, None
    if not payload.get("ok"):
        return None, payload.get("error_type"), payload.get("error")
    try:
        return WorkerResult.from_dict(payload.get("result") or {}), None, None
    except (TypeError, ValueError) as exc:
        return None, "BadResult", str(exc)


def _outcome(task: _Live, run_start: float, now: float) -> TaskOutcome:
    spec = task.spec
    if task.proc is None:
        return TaskOutcome(spec.name, spec.task_type, spec.index, spec.role, task.attempt,
                           False, False, None, None, None, "not-started",
                           "was never started (--fault absent)", None, None, None, [],
                           str(task.dir), 0.0, None, None, None)
    result, error_type, error = _read_result(task)
    rc = task.proc.returncode
    ended = task.ended_at if task.ended_at is not None else now
    return TaskOutcome(
        spec.name, spec.task_type, spec.index, spec.role, task.attempt, True, task.formed,
        task.last_step, task.resumed_from, rc, task.ended_by, describe_exit(rc), error_type,
        error, result, tail_lines(task.dir / layout.STDERR_TXT, 15), str(task.dir),
        ended - task.started, ended - run_start, task.proc.pid, task.listening)


def _failed(task: _Live, coordinator_done: bool) -> bool:
    """Ended, and not the way it should: a non-zero exit, a signal, the drill's kill. A
    ps-mode server that ends once the coordinator is done is not a failure."""
    if task.proc is None or task.proc.poll() is None:
        return False
    if task.ended_by == "killed-by-drill":
        return True
    if task.spec.role == "server" and coordinator_done:
        return False
    return task.proc.returncode != 0 or task.spec.role == "server"


def run_cluster(run_dir: Path, config_name: str, mode: str, specs: Sequence[TaskSpec],
                limits: Limits, *, fault: Fault | None = None,
                on_step: Callable[[str, int], None] | None = None,
                clock: Callable[[], float] = time.monotonic) -> ClusterRun:
    """Run one cluster configuration to its end; see the module docstring."""
    start = clock()
    deadline = start + limits.timeout_s
    attempts: list[list[TaskOutcome]] = []
    failed_names: list[str] = []
    restarts = 0
    workers = sum(1 for s in specs
                  if s.task_type in ("chief", "worker") and s.role != "coordinator")
    batch = specs[0].config.workload.batch_per_device if specs else 0
    outcome = "timeout"
    attempt = 0
    watch = _Watch(run_dir, config_name, mode, limits, deadline, on_step, clock)
    while True:
        live = [_Live(s, attempt, layout.child_path(run_dir, layout.task_child_name(
                    config_name, s.name, attempt)), None, clock())
                if fault is not None and fault.kind == "absent" and fault.task == s.name
                else _spawn(run_dir, config_name, s, attempt, clock) for s in specs]
        replaced: list[_Live] = []
        try:
            outcome, first_failed = _watch(watch, live, replaced, start_attempt=clock(),
                                           fault=fault if attempt == 0 else None,
                                           restarts_left=limits.restarts - restarts)
        finally:
            _stop(live, clock)
        restarts += len(replaced)
        now = clock()
        attempts.append([_outcome(t, start, now) for t in replaced + live])
        failed_names += first_failed
        if outcome == "task-failed" and restarts < limits.restarts and clock() < deadline:
            restarts += 1
            attempt += 1
            continue
        break
    return ClusterRun(config_name, mode, workers, batch, outcome, attempts, failed_names,
                      restarts, clock() - start)


@dataclass(frozen=True)
class _Watch:
    """What every attempt of one cluster configuration is watched with."""

    run_dir: Path
    config_name: str
    mode: str  # "sync" or "ps"
    limits: Limits
    deadline: float  # on ``clock``: the whole run's end
    on_step: Callable[[str, int], None] | None
    clock: Callable[[], float]


def _watch(watch: _Watch, live: list[_Live], replaced: list[_Live], *, start_attempt: float,
           fault: Fault | None, restarts_left: int) -> tuple[str, list[str]]:
    """Poll until the attempt ends; returns (outcome, the tasks that failed first)."""
    run_dir, config_name, mode = watch.run_dir, watch.config_name, watch.mode
    limits, deadline, clock = watch.limits, watch.deadline, watch.clock
    first_failure: float | None = None
    failed: list[str] = []
    ever_formed = False
    while True:
        now = clock()
        steps = [t.last_step or 0 for t in live if t.spec.role != "server"]
        cluster_step = max(steps, default=0)  # a ps-mode server's step: the coordinator's
        for t in live:
            fault = _poll_task(t, now, cluster_step, watch, fault)
        if not ever_formed:
            ever_formed = all(t.proc is not None and t.formed for t in live)
        trainers = [t for t in live if t.spec.role in ("trainer", "coordinator")]
        done = all(t.proc is not None and t.proc.poll() == 0 and t.ended_by == "exit"
                   for t in trainers)
        coordinator_done = mode == "ps" and done
        if done:
            return "complete", failed
        for t in list(live):
            if t.spec.name in failed or not _failed(t, coordinator_done):
                continue
            if (mode == "ps" and t.spec.task_type == "worker" and restarts_left > 0
                    and first_failure is None):
                restarts_left -= 1
                replaced.append(t)
                live[live.index(t)] = _spawn(run_dir, config_name, t.spec, t.attempt + 1, clock)
                failed.append(t.spec.name)
                continue
            failed.append(t.spec.name)
            first_failure = first_failure if first_failure is not None else now
        if first_failure is not None:
            if not ever_formed:  # it can no longer form: the others would wait forever
                return "never-formed", failed
            running = [t for t in live if t.proc is not None and t.proc.poll() is None]
            if not running or now - first_failure > limits.grace_s:
                return "task-failed", failed
        elif not ever_formed and now - start_attempt > limits.form_timeout_s:
            return "never-formed", failed
        if now > deadline:
            return "timeout", failed
        stops.check()  # a stop request a callback dropped: the tasks are stopped now
        time.sleep(POLL_S)


def _poll_task(t: _Live, now: float, cluster_step: int, watch: _Watch,
               fault: Fault | None) -> Fault | None:
    """One task's poll: its end, its new output and steps, its server, and the kill drill
    when its step has come; returns the fault still to come (None: none, or fired: once,
    not on its restarted successor)."""
    if t.proc is None:
        return fault
    if t.ended_at is None and t.proc.poll() is not None:
        t.ended_at = now
        if t.spec.role == "server":  # a server prints no steps: the cluster's
            t.last_step = cluster_step
    before = t.last_step
    _follow(t)
    if not t.listening and t.proc.poll() is None:  # until its server is up
        t.listening = sockets.listening(t.proc.pid)
    if watch.on_step is not None and t.last_step is not None and t.last_step != before:
        watch.on_step(t.spec.name, t.last_step)
    step = cluster_step if t.spec.role == "server" else (t.last_step or 0)
    if (fault is None or fault.kind != "kill" or fault.task != t.spec.name
            or t.ended_by != "exit" or step < (fault.at_step or 0) or t.proc.poll() is not None):
        return fault
    procs.signal_group(t.proc, signal.SIGKILL)
    t.proc.wait()
    t.ended_by = "killed-by-drill"
    t.ended_at = watch.clock()
    t.last_step = step
    return None


