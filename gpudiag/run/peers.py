"""A cluster's tasks tell each other how far they are, through the shared logdir (parent
side, no TensorFlow).

Every `gpudiag run` whose program joined a cluster publishes, for each task its program
runs, one small JSON file, ``<logdir>/cluster-<key>/live/<type>-<index>.json``
(gpudiag.layout.run_task_live_name): the steps finished, the latest step's end, its stall
(where it waits, as gpudiag.inprogram.stallwatch named it: the frame, not the stacks, so a
file stays a few KB), and at the end how the program ended. The file is rewritten whole
(write to a temporary name, then rename) when the state changed, at most every poll of
gpudiag.run.live; readers never see half a file.

The same thread reads the other tasks' files (``Board.news``): a peer's new stall is told
with which worker is behind (gpudiag.verdicts.run.peers), and a peer seen running that is
gone (its gpudiag published an abnormal end; or, on this host, its program and its gpudiag
no longer run and nothing final was published). A file left by an earlier job (ended
before this run started, or on this host with its processes gone before this run saw it
running) is not a peer.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

from gpudiag import files
from gpudiag.errors import WriteFailed
from gpudiag.layout import (
    RUN_CLUSTER_LIVE_DIR,
    RUN_CLUSTER_LIVE_SUFFIX,
    run_cluster_dir,
    run_task_live_name,
)
from gpudiag.layout import events as ev
from gpudiag.run.tasks import cluster_key
from gpudiag.verdicts.run import peers as run_peers

MAX_CODE = 200


def _trim_frame(frame: Any) -> dict[str, Any] | None:
    if not isinstance(frame, dict):
        return None
    return {"file": str(frame.get("file", "?"))[-300:], "line": frame.get("line"),
            "function": str(frame.get("function", "?"))[:100],
            "code": str(frame.get("code", ""))[:MAX_CODE]}


def how_ended(returncode: int | None) -> tuple[str, bool]:
    """(words, normal) for the program's exit status."""
    if returncode is None:
        return "its end was not seen", False
    if returncode < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-returncode).name}", False
        return f"killed by signal {-returncode}", False
    return f"exit {returncode}", returncode == 0


def _alive(pid: Any) -> bool:
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # EPERM: it runs, as someone else
        return True
    try:  # a zombie (ended, not yet reaped by its parent) is gone
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


class Board:
    """This run's tasks' live states (published) and the other tasks' (read)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.logdir = run_dir.parent
        self.started_unix_s = time.time()
        self.host = socket.gethostname()
        self.own: dict[int, dict[str, Any]] = {}  # program pid -> its task's state
        self.keys: dict[int, str] = {}
        self._dirty: set[int] = set()
        self.peers: dict[str, dict[str, Any]] = {}  # task -> its latest state read
        self._running: set[str] = set()  # peers seen running during this run
        self._told_stall: dict[str, float] = {}
        self._told_gone: set[str] = set()
        self.notes: list[dict[str, Any]] = []  # every peer's stall or end told, in order

    # ---------------------------------------------------------------- this run's tasks
    def join(self, pid: int, join: ev.ClusterJoin) -> None:
        task_type, task_id, spec = join.task_type, join.task_id, join.cluster_spec
        if not task_type or task_id is None or not isinstance(spec, dict):
            return
        self.keys[pid] = cluster_key(spec)
        self.own[pid] = {"task": f"{task_type}-{task_id}", "task_type": str(task_type),
                         "task_id": int(task_id), "host": self.host, "pid": pid,
                         "gpudiag_pid": os.getpid(), "run_dir": str(self.run_dir.resolve()),
                         "updated_unix_s": None, "steps": 0, "last_step_end_unix_s": None,
                         "stall": None, "stall_ended_after_s": None, "ended": None}
        self._dirty.add(pid)

    def state(self, pid: int) -> dict[str, Any] | None:
        return self.own.get(pid)

    def steps(self, pid: int, finished: int, last_end_unix_s: float | None) -> None:
        state = self.own.get(pid)
        if state is None or finished <= state["steps"]:
            return
        state["steps"] = finished
        if last_end_unix_s is not None:
            state["last_step_end_unix_s"] = last_end_unix_s
        self._dirty.add(pid)

    def stall(self, pid: int, event: dict[str, Any]) -> None:
        """``event``: the stall as the run state holds it (gpudiag.run.events)."""
        state = self.own.get(pid)
        if state is None:
            return
        where = event.get("where") or {}
        state["stall"] = {"t": event.get("t"), "waited_s": event.get("waited_s"),
                          "since": event.get("since"), "steps": event.get("steps"),
                          "where": {"kind": where.get("kind"),
                                    "frame": _trim_frame(where.get("frame")),
                                    "waiting": _trim_frame(where.get("waiting"))}}
        state["stall_ended_after_s"] = None
        self._dirty.add(pid)

    def stall_end(self, pid: int, after_s: float) -> None:
        state = self.own.get(pid)
        if state is not None and state["stall"] is not None:
            state["stall_ended_after_s"] = after_s
            self._dirty.add(pid)

    def end(self, pid: int, how: str, normal: bool) -> None:
        state = self.own.get(pid)
        if state is not None and state["ended"] is None:
            state["ended"] = {"t": time.time(), "how": how, "normal": normal}
            self._dirty.add(pid)

    def publish(self) -> None:
        for pid in sorted(self._dirty):
            state = self.own[pid]
            state["updated_unix_s"] = time.time()
            directory = run_cluster_dir(self.logdir, self.keys[pid]) / RUN_CLUSTER_LIVE_DIR
            with contextlib.suppress(OSError, WriteFailed):  # the final report still tells
                directory.mkdir(parents=True, exist_ok=True)
                files.atomic_write_text(
                    directory / run_task_live_name(state["task_type"], state["task_id"]),
                    json.dumps(state) + "\n")
        self._dirty.clear()

    # ------------------------------------------------------------------ the other tasks
    def _read(self) -> list[dict[str, Any]]:
        mine = {s["task"] for s in self.own.values()}
        out = []
        for key in sorted(set(self.keys.values())):
            directory = run_cluster_dir(self.logdir, key) / RUN_CLUSTER_LIVE_DIR
            for path in sorted(directory.glob(f"*{RUN_CLUSTER_LIVE_SUFFIX}")):
                with contextlib.suppress(OSError, ValueError):
                    state = json.loads(path.read_text(encoding="utf-8"))
                    if isinstance(state, dict) and state.get("task") not in mine:
                        out.append(state)
        return out

    def _current(self) -> list[tuple[dict[str, Any], bool | None]]:
        """The peers of this run with whether their processes live (None: another host)."""
        out = []
        for peer in self._read():
            name = str(peer.get("task"))
            ended = peer.get("ended") or None
            if ended and float(ended.get("t") or 0) < self.started_unix_s:
                continue  # an earlier job's task
            alive = (_alive(peer.get("pid")) or _alive(peer.get("gpudiag_pid"))) \
                if peer.get("host") == self.host else None
            if not ended and alive is not False:
                self._running.add(name)
            elif not ended and name not in self._running:
                continue  # never seen running, its processes gone: an earlier job's
            self.peers[name] = peer
            out.append((peer, alive))
        return out

    def news(self) -> list[tuple[str, str, float]]:
        """(kind, text, time) of what changed among the peers since the last call: a new
        stall (``stall``, ``behind``) or a peer gone (``gone``)."""
        own = next(reversed(self.own.values()), None) if self.own else None
        out: list[tuple[str, str, float]] = []
        for peer, alive in self._current():
            name = str(peer.get("task"))
            why = run_peers.gone(peer, alive=alive)
            if why:
                if name not in self._told_gone:
                    self._told_gone.add(name)
                    out.append(("gone", why, time.time()))
                    self._note(*out[-1])
                continue
            stall = peer.get("stall") or {}
            if stall.get("t") and peer.get("stall_ended_after_s") is None and \
                    not peer.get("ended") and self._told_stall.get(name) != stall["t"]:
                self._told_stall[name] = stall["t"]
                kind = "behind" if run_peers.is_behind(peer, own) else "stall"
                out.append((kind, run_peers.describe_peer(peer, own), float(stall["t"])))
                self._note(*out[-1])
        return out

    def _note(self, kind: str, text: str, t: float) -> None:
        self.notes.append({"kind": kind, "t": t, "text": text})

    def clause_for_stall(self, pid: int) -> str:
        """The peers' part of this task's stall line (each peer's stall told once)."""
        if pid not in self.own:
            return ""
        running = [p for p, _ in self._current()] + \
            [s for p, s in self.own.items() if p != pid]  # a launcher's other tasks
        for p in running:
            stall = p.get("stall") or {}
            if stall.get("t") and p.get("stall_ended_after_s") is None and \
                    not p.get("ended"):
                self._told_stall[str(p.get("task"))] = stall["t"]
                self._note("behind" if run_peers.is_behind(p, self.own[pid]) else "stall",
                           run_peers.describe_peer(p, self.own[pid]), float(stall["t"]))
        return run_peers.peers_clause(running, self.own[pid])
