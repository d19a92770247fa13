"""A multi-worker job watched live, each worker under its own `gpudiag run` sharing one
--logdir (as on two machines with a shared filesystem): a worker that holds back before
its first step is named by the other, with where it waits, while both still run; a worker
killed mid-run is told by the other's gpudiag while it still runs. Real TensorFlow
(MultiWorkerMirroredStrategy on loopback), real processes, real signals; the program
waits on a file the test controls."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, TESTS_DIR, findings_by_id, load_report, process_alive, run_dirs

from gpudiag import layout
from gpudiag.records.tfconfig import free_ports

PY = sys.executable
PROGRAM = TESTS_DIR / "programs" / "mwms_waits.py"
DEADLINE_S = 180.0

pytestmark = pytest.mark.slow


class Worker:
    """One worker under its own `gpudiag run`; its output read as it comes (a thread, so
    a full pipe never blocks it), lines waited for on a condition."""

    def __init__(self, logdir: Path, ports: list[int], index: int, *args: str,
                 options: tuple[str, ...] = ()) -> None:
        tf_config = json.dumps({"cluster": {"worker": [f"127.0.0.1:{p}" for p in ports]},
                                "task": {"type": "worker", "index": index}})
        self.proc = subprocess.Popen(
            [PY, "-m", "gpudiag", "run", "--logdir", str(logdir), *options, "--", PY,
             str(PROGRAM), *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, stdin=subprocess.DEVNULL, cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO), "TF_CONFIG": tf_config})
        self.lines: list[str] = []
        self.done = False
        self.changed = threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            with self.changed:
                self.lines.append(line)
                self.changed.notify_all()
        with self.changed:
            self.done = True
            self.changed.notify_all()

    def wait_line(self, *needles: str) -> str:
        """The first line holding every needle; fails when the run ends without one."""
        with self.changed:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if all(n in line for n in needles):
                        return line
                seen = len(self.lines)
                assert not self.done, f"no line with {needles}:\n" + "".join(self.lines[-40:])
                assert self.changed.wait(DEADLINE_S), f"no line with {needles} in time"

    def finish(self, timeout_s: float = 180) -> int:
        code = self.proc.wait(timeout=timeout_s)
        with self.changed:
            while not self.done:
                self.changed.wait(10)
        return code

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(30)


def _report(logdir: Path, marker: str) -> dict[str, Any]:
    """The report of the run whose program printed ``marker``."""
    for run_dir in run_dirs(logdir):
        stdout = run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME / layout.RUN_STDOUT
        if marker in stdout.read_text():
            report: dict[str, Any] = load_report(run_dir)
            return report
    raise AssertionError(f"no run printed {marker!r}")


def _program_pids(logdir: Path) -> dict[int, int]:
    """Each worker's program: task index -> pid (its events file; its TF_CONFIG)."""
    found = {}
    for run_dir in run_dirs(logdir):
        out = run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME
        for events in out.glob(f"{layout.RUN_EVENTS_PREFIX}*{layout.RUN_EVENTS_SUFFIX}"):
            pid = int(events.name[len(layout.RUN_EVENTS_PREFIX):].split(".")[0])
            env = dict(v.split("=", 1) for v in
                       Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in v)
            found[json.loads(env["TF_CONFIG"])["task"]["index"]] = pid
    return found


def _line_of(text: str) -> int:
    (n,) = [n for n, line in enumerate(PROGRAM.read_text().splitlines(), 1) if text in line]
    return n


def test_a_worker_holding_back_is_named_by_the_other_with_where_it_waits(
        tmp_path: Path) -> None:
    logdir, gate = tmp_path / "shared", tmp_path / "gate"
    ports = free_ports(2)
    workers = [Worker(logdir, ports, i, str(gate), "before",
                      options=("--stall-timeout", "3")) for i in (0, 1)]
    try:
        # worker 0's first step waits in the all-reduce for worker 1, which waits for the
        # gate in its own code: worker 0's gpudiag says so, with the line, while both run
        behind = workers[0].wait_line(
            "worker-1 is behind: it has not reached its first step; it waits at "
            f"mwms_waits.py:{_line_of('time.sleep(0.05)')} in wait_for_gate()")
        assert all(w.proc.poll() is None for w in workers)
        assert behind[:8].count(":") == 2 and "gpudiag (pid" in behind  # HH:MM:SS first
        own = workers[0].wait_line("stalled: no step has finished in the")
        assert "since it joined the cluster" in own
        assert "waits inside TensorFlow's runtime running the step function" in own
        assert f"mwms_waits.py:{_line_of('loss = step(x)')} in <module>()" in own
        # worker 1's own stall names its own line, and worker 0 waiting inside its step
        mine = workers[1].wait_line("stalled: no step has finished in the")
        assert f"mwms_waits.py:{_line_of('time.sleep(0.05)')} in wait_for_gate()" in mine
        gate.touch()
        codes = [w.finish() for w in workers]
    finally:
        for w in workers:
            w.stop()
    assert codes == [0, 0], "".join(workers[0].lines[-30:] + workers[1].lines[-30:])
    assert "steps again after a stall" in "".join(workers[0].lines)
    found = findings_by_id(_report(logdir, "worker 0 final loss"))
    assert found["run.stall"]["status"] == "warn"
    peers = found["run.peers"]
    assert peers["status"] == "warn" and "worker-1 is behind" in peers["message"]
    # each task's live state: one small file, ended with its exit status
    (cluster,) = logdir.glob(layout.RUN_CLUSTER_DIR_PREFIX + "*")
    live = {p.name: p for p in (cluster / layout.RUN_CLUSTER_LIVE_DIR).iterdir()}
    assert sorted(live) == ["worker-0.json", "worker-1.json"]
    for path in live.values():
        assert path.stat().st_size < 4096
        state = json.loads(path.read_text())
        assert state["steps"] == 10 and state["ended"]["how"] == "exit 0"


def test_a_worker_killed_mid_run_is_told_by_the_other_while_it_runs(tmp_path: Path) -> None:
    logdir, gate = tmp_path / "shared", tmp_path / "gate"
    ports = free_ports(2)
    # worker 0 hangs on the gate and TensorFlow catches the SIGTERM passed on: the stop
    # ends in gpudiag's SIGKILL, after --grace (its default 30 s would only be waited out)
    workers = [Worker(logdir, ports, i, str(gate), "after", options=("--grace", "2"))
               for i in (0, 1)]
    pids: list[int] = []
    try:
        for i, w in enumerate(workers):  # 5 steps each, then both hang on the gate
            w.wait_line(f"worker {i} waits for the gate")
        by_index = _program_pids(logdir)
        pids = [by_index[0], by_index[1]]
        os.kill(pids[1], signal.SIGKILL)
        gone = workers[0].wait_line(f"worker-1 (pid {pids[1]} on", "is gone: its program "
                                    "ended (killed by SIGKILL)")
        assert "after 5 step(s)" in gone
        assert workers[0].proc.poll() is None  # told while it still runs
        assert workers[1].finish() == 128 + signal.SIGKILL
        workers[0].proc.send_signal(signal.SIGTERM)  # the user stops the hung job
        assert workers[0].finish() == 128 + signal.SIGTERM
    finally:
        for w in workers:
            w.stop()
    assert not any(process_alive(p) for p in pids)  # nothing left behind
    peers = findings_by_id(_report(logdir, "worker 0 waits"))["run.peers"]
    assert peers["status"] == "warn" and "worker-1 (pid" in peers["message"]
    assert "is gone: its program ended (killed by SIGKILL)" in peers["message"]
    assert [n["kind"] for n in peers["evidence"]["told"]] == ["gone"]
