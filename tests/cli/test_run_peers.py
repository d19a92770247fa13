"""The cluster's live states shared in the logdir (gpudiag.run.peers): what one task's
gpudiag tells of the others, from their published files and, on this host, whether their
processes still run. Real files, real processes; the verdicts on plain data."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpudiag import layout
from gpudiag.layout import events as ev
from gpudiag.run import peers
from gpudiag.run.tasks import cluster_key
from gpudiag.verdicts.run import peers as run_peers

SPEC = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}


def _board(tmp_path: Path) -> tuple[peers.Board, Path]:
    run_dir = tmp_path / "logdir" / "run"
    run_dir.mkdir(parents=True)
    board = peers.Board(run_dir)
    board.join(4242, ev.ClusterJoin(task_type="worker", task_id=0, cluster_spec=SPEC))
    board.publish()
    return board, run_dir.parent / f"{layout.RUN_CLUSTER_DIR_PREFIX}{cluster_key(SPEC)}" \
        / layout.RUN_CLUSTER_LIVE_DIR


def _peer(pid: int, **fields: Any) -> dict[str, Any]:
    return {"task": "worker-1", "task_type": "worker", "task_id": 1,
            "host": socket.gethostname(), "pid": pid, "gpudiag_pid": pid,
            "updated_unix_s": time.time(), "steps": 5, "last_step_end_unix_s": time.time(),
            "stall": None, "stall_ended_after_s": None, "ended": None, **fields}


def test_a_peer_whose_processes_vanish_without_a_final_state_is_told_gone_once(
        tmp_path: Path) -> None:
    board, live = _board(tmp_path)
    assert json.loads((live / "worker-0.json").read_text())["task"] == "worker-0"
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                            stdin=subprocess.PIPE)
    try:
        (live / "worker-1.json").write_text(json.dumps(_peer(proc.pid)))
        assert board.news() == []  # running, no stall: nothing to tell
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        ((kind, text, _),) = board.news()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert kind == "gone"
    assert f"worker-1 (pid {proc.pid} on" in text and "no final state published" in text
    assert "after 5 step(s)" in text
    assert board.news() == []  # told once
    assert [n["kind"] for n in board.notes] == ["gone"]


def test_an_earlier_jobs_files_are_no_peers(tmp_path: Path) -> None:
    board, live = _board(tmp_path)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()  # a pid that no longer runs
    ended = {"t": board.started_unix_s - 60, "how": "killed by SIGKILL", "normal": False}
    (live / "worker-1.json").write_text(json.dumps(_peer(proc.pid, ended=ended)))
    (live / "worker-2.json").write_text(json.dumps(
        _peer(proc.pid, task="worker-2", task_id=2)))  # never seen running, gone
    assert board.news() == [] and board.peers == {}


def test_a_peer_waiting_outside_its_step_is_behind_one_waiting_inside() -> None:
    frame = {"file": "/x/train.py", "line": 44, "function": "wait", "code": "q.get()"}
    own = _peer(1, task="worker-0", steps=3,
                stall={"t": 1.0, "waited_s": 9.0, "where": {"kind": "step", "frame": frame}})
    peer = _peer(2, steps=3, stall={"t": 1.0, "waited_s": 9.5,
                                    "where": {"kind": "user", "frame": frame}})
    assert run_peers.is_behind(peer, own) and not run_peers.is_behind(own, peer)
    text = run_peers.describe_peer(peer, own)
    assert text.startswith("worker-1 is behind: it has finished 3 step(s), the last at ")
    assert "it waits at train.py:44 in wait() `q.get()` (no step for 9.5 s" in text
    assert run_peers.is_behind(_peer(2, steps=2), own)  # fewer steps
    assert run_peers.describe_peer(_peer(2, steps=0), None).endswith(
        "it has not reached its first step; it has reported no stall")
    assert run_peers.gone(_peer(2, ended={"t": 1.0, "how": "exit 0", "normal": True}),
                          alive=False) is None  # a normal end is no worker gone
    assert run_peers.gone(_peer(2), alive=None) is None  # another host: not checkable


def test_a_cluster_task_gets_longer_before_its_first_step_than_between_steps() -> None:
    # building the model and loading data come after the join in real jobs: the default
    # timeout before the first step is FIRST_STEP_FLOOR_S, then the usual floor; a
    # timeout the user set holds throughout
    from gpudiag.inprogram import stallwatch

    watch = stallwatch.StallWatch(object(), None)  # type: ignore[arg-type]
    assert watch.timeout() == stallwatch.STALL_FLOOR_S
    watch.arm()
    assert watch.since == "cluster_joined"
    assert watch.timeout() == stallwatch.FIRST_STEP_FLOOR_S > stallwatch.STALL_FLOOR_S
    watch.on_step(object(), 1)
    assert watch.timeout() == stallwatch.STALL_FLOOR_S
    assert stallwatch.StallWatch(object(), 3.0).timeout() == 3.0  # type: ignore[arg-type]
