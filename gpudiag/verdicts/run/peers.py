"""Verdicts about the other tasks of a cluster, from their live states in the shared logdir
(gpudiag.run.peers publishes and reads them): which worker is behind and where it waits,
and a worker gone mid-run. Pure functions of plain dicts (the published state, below);
told live by gpudiag.run.live with the time, and reported as ``run.peers``.

A task's live state (``TaskLive.to_dict``): ``task`` (``worker-1``), ``host``, ``pid`` (the
program's process), ``gpudiag_pid``, ``run_dir``, ``updated_unix_s``, ``steps`` (finished),
``last_step_end_unix_s``, ``stall`` (its latest stall event, trimmed: ``t``, ``waited_s``,
``since``, ``where``) or None, ``stall_ended_after_s``, ``ended`` (``t``, ``how``,
``normal``) or None.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from gpudiag.report import Finding

IN_STEP = ("step", "collective")  # a stall inside the step: waits on the others


def _clock(t: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t)) if t else "?"


def _frame(frame: dict[str, Any] | None) -> str:
    if not frame:
        return ""
    return (f"{Path(str(frame.get('file', '?'))).name}:{frame.get('line')} in "
            f"{frame.get('function')}() `{frame.get('code', '')}`")


def _stalled(state: dict[str, Any]) -> dict[str, Any] | None:
    stall = state.get("stall")
    return stall if stall and state.get("stall_ended_after_s") is None else None


def is_behind(peer: dict[str, Any], own: dict[str, Any] | None) -> bool:
    """Fewer finished steps than this task, or as many while it waits outside a step and
    this task waits inside one (for it, in the all-reduce)."""
    if own is None:
        return False
    p_steps, o_steps = int(peer.get("steps") or 0), int(own.get("steps") or 0)
    if p_steps != o_steps:
        return p_steps < o_steps
    p_stall, o_stall = _stalled(peer), _stalled(own)
    return bool(p_stall and o_stall and
                (o_stall.get("where") or {}).get("kind") in IN_STEP and
                (p_stall.get("where") or {}).get("kind") not in IN_STEP)


def describe_peer(peer: dict[str, Any], own: dict[str, Any] | None) -> str:
    """``worker-1 is behind: it has not reached its first step; it waits at prog.py:44 in
    wait() `...```: what the peer published, nothing more."""
    name = str(peer.get("task", "?"))
    steps = int(peer.get("steps") or 0)
    text = f"{name} is behind: " if is_behind(peer, own) else f"{name}: "
    stall = _stalled(peer)
    in_step = stall is not None and (stall.get("where") or {}).get("kind") in IN_STEP
    text += ("it has not finished its first step" if steps == 0 and in_step else
             "it has not reached its first step" if steps == 0 else
             f"it has finished {steps} step(s), the last at "
             f"{_clock(peer.get('last_step_end_unix_s'))}")
    ended = peer.get("ended")
    if ended:
        return text + f"; its program ended ({ended.get('how')}) at {_clock(ended.get('t'))}"
    if stall is None:
        return text + "; it has reported no stall"
    where = stall.get("where") or {}
    frame = _frame(where.get("frame"))
    if where.get("kind") in IN_STEP:
        text += "; it waits inside its step" + (f", called at {frame}" if frame else "")
    elif frame:
        text += f"; it waits at {frame}"
    if where.get("waiting"):
        text += f"; its input pipeline waits at {_frame(where['waiting'])}"
    return text + f" (no step for {float(stall.get('waited_s') or 0):.1f} s at " \
                  f"{_clock(stall.get('t'))})"


def peers_clause(peers: list[dict[str, Any]], own: dict[str, Any] | None) -> str:
    """What the stall line adds about the cluster's other tasks still running."""
    live = [p for p in peers if not p.get("ended")]
    return "; in the cluster: " + "; ".join(describe_peer(p, own) for p in live) \
        if live else ""


def gone(peer: dict[str, Any], *, alive: bool | None) -> str | None:
    """Why a peer of this run is gone, or None: its gpudiag published an end other than a
    normal exit, or (same host: ``alive`` False) its program and its gpudiag are both gone
    without a final state. ``alive`` None: another host, the processes cannot be checked."""
    name, pid, host = peer.get("task", "?"), peer.get("pid"), peer.get("host")
    steps = int(peer.get("steps") or 0)
    ended = peer.get("ended")
    if ended:
        if ended.get("normal"):
            return None
        return (f"{name} (pid {pid} on {host}) is gone: its program ended ({ended.get('how')}) "
                f"at {_clock(ended.get('t'))} after {steps} step(s)")
    if alive is False:
        return (f"{name} (pid {pid} on {host}) is gone: its program (pid {pid}) and its "
                f"gpudiag (pid {peer.get('gpudiag_pid')}) no longer run, with no final state "
                f"published; last seen after {steps} step(s), updated at "
                f"{_clock(peer.get('updated_unix_s'))}")
    return None


def peers_finding(notes: list[dict[str, Any]], peers: dict[str, dict[str, Any]],
                  own_tasks: list[str]) -> Finding | None:
    """``run.peers``: what this run saw live of its cluster's other tasks. None when the
    program joined no cluster."""
    if not own_tasks:
        return None
    fid = "run.peers"
    evidence = {"tasks": own_tasks, "peers": sorted(peers), "told": notes}
    if not peers:
        return Finding(fid, "skip", f"no other task of the cluster of {', '.join(own_tasks)} "
                       "published its live state in this logdir (each task runs under its "
                       "own `gpudiag run` with the same --logdir to be seen)", evidence,
                       title="no other task of the cluster was seen in this logdir")
    kinds = {n["kind"] for n in notes}
    if not kinds:
        return Finding(fid, "ok", f"{len(peers)} other task(s) seen while it ran "
                       f"({', '.join(sorted(peers))}): none gone, none reported a stall", evidence,
                       title=f"{len(peers)} other task(s) seen: none gone, none stalled")
    text = " | ".join(f"{_clock(n['t'])} {n['text']}" for n in notes)
    if not kinds & {"behind", "gone"}:
        return Finding(fid, "ok", f"none of the {len(peers)} other task(s) was behind or "
                       f"gone; told while it ran: {text}", evidence,
                       title=f"none of the {len(peers)} other task(s) was behind or gone")
    advice = ("A worker gone stops every synchronous step of the others: its own report "
              "(run directory in the evidence) says how it ended; restart it, or the job, "
              "from a checkpoint." if "gone" in kinds else
              "The worker named behind held the cluster: its line is where to look.")
    gone = sum(1 for n in notes if n["kind"] == "gone")
    behind = sum(1 for n in notes if n["kind"] == "behind")
    return Finding(fid, "warn", text, evidence, advice=advice,
                   title=f"of {len(peers)} other task(s): {gone} gone, {behind} behind")
