"""While the program runs: its events read as they are appended, shown as they happen
(parent side, no TensorFlow).

A thread follows every ``events-<pid>.jsonl`` (by offset: only whole new lines are read)
and, every POLL_S:

- writes the program's step scalars (program/loss, metrics, step time, examples/s, as
  gpudiag.run.tbwrite names them) into ``program-<pid>/`` and flushes the file at least
  every TB_FLUSH_S, so TensorBoard (which reloads about every 30 s) shows a running job;
  at the end this file is the final one when it holds every step the report reads
  (tbwrite.ProgramFile; else tbwrite.write_program writes it again, whole), so that
  gpudiag returns soon after a long job ends;
- tells the terminal, with the time, what can be decided mid-run: a stall
  (gpudiag.inprogram.stallwatch: no step for the stall timeout, and where the step waits), the
  stall's end, a NaN or inf loss, a loss stuck at ln(classes) with the class count from
  the program (gpudiag.verdicts.run.live; each once per loop); each also goes to
  TensorBoard's Text tab (``gpudiag/live``) in the same file;
- with NVML, writes the samples the run's nvml.Sampler took since the last poll into
  ``nvml/`` (same tags as the finished run; gpudiag.run.livegpu), flushed with the rest,
  and tells a GPU at 0 % for the last IDLE_WINDOW_S while another works
  (gpudiag.verdicts.run.gpu_idle; its Text tab line goes into the live ``nvml/`` file),
  kept at the end as the program's is (livegpu.NvmlFile).
- matches the program's saved stderr against the catalogue as it is written
  (gpudiag.run.stderrscan), so that after the program ends only its last lines are left to read: an
  hour of logging is not matched at the end;
- for a program that joined a cluster, publishes each task's live state in the shared
  logdir and tells what the other tasks published (gpudiag.run.peers): which worker is
  behind and where it waits, a worker gone.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag import nvml
from gpudiag.layout import RUN_STDERR, TAG_RUN_LIVE, loop_prefix, run_tb_name
from gpudiag.layout import events as ev
from gpudiag.layout import loopevents as lev
from gpudiag.records.run import Step, StepSeries
from gpudiag.run import peers, tbwrite
from gpudiag.run.eventfiles import Follower
from gpudiag.run.every import Every
from gpudiag.run.livegpu import LiveGpus, NvmlFile
from gpudiag.run.runstate import Loop, ProcessState
from gpudiag.run.stderrscan import StderrScan
from gpudiag.run.tbwrite import ProgramFile
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.run.live import describe_stall, stuck_at_ln_classes

POLL_S = 0.5
TB_FLUSH_S = 5.0  # TensorBoard reloads about every 30 s


@dataclass
class _Shown:
    """What the live views did with one loop (the key: pid, and the loop's own key)."""

    held: list[Step] = field(default_factory=list)  # fit's last step, until the next
    told_bad_loss: bool = False
    told_stuck: bool = False


@dataclass
class LiveState:
    """What the live thread has shown (read by the final report)."""

    messages: list[tuple[float, str]] = field(default_factory=list)
    # the cluster's other tasks (gpudiag.run.peers): what was told, the states last read
    peer_notes: list[dict[str, Any]] = field(default_factory=list)
    peers: dict[str, dict[str, Any]] = field(default_factory=dict)
    own_tasks: list[str] = field(default_factory=list)
    # the TensorBoard files written (the end keeps those that hold it all)
    programs: dict[int, ProgramFile] = field(default_factory=dict)
    nvml: NvmlFile | None = None
    stderr_scan: StderrScan | None = None  # the catalogue's matches so far


def _preload() -> None:
    from gpudiag.tb import breakdown

    with contextlib.suppress(Exception):  # the report's picture, drawn at the end
        breakdown.preload()


class Live:
    def __init__(self, events_dir: Path, run_dir: Path, say: Callable[[str], None],
                 sampler: nvml.Sampler | None = None) -> None:
        self.events_dir = events_dir
        self.run_dir = run_dir
        self.say = say
        self.state = LiveState(stderr_scan=StderrScan(events_dir / RUN_STDERR))
        self.gpus = LiveGpus(sampler, run_dir) if sampler is not None else None
        self.follower = Follower(events_dir)  # the one run state, per process
        self._writers: dict[int, EventWriter] = {}
        self._shown: dict[tuple[int, str, str], _Shown] = {}  # per loop: (pid, kind, name)
        self.board = peers.Board(run_dir)
        self._latest: Loop | None = None  # the loop that stepped last (the status line)
        self._last_flush = -TB_FLUSH_S  # the first scalars are flushed at once
        self._dirty = False
        self._preloaded = False  # the picture's matplotlib, once a profile window opened
        self._every = Every(POLL_S, lambda: self._guarded(self.poll), "gpudiag-live")

    def start(self) -> Live:
        self._every.start()
        return self

    def stop(self, returncode: int | None = None,
             program_pid: int | None = None) -> LiveState:
        """After the program ended (``returncode``: the program's, ``program_pid`` its own
        pid; the sampler stopped):
        read what is left, publish how its cluster tasks ended, close the live
        TensorBoard files (the final report keeps those that hold it all)."""
        if not self._every.stop(10):  # still in a poll: what it wrote is not trusted
            self._not_whole()
        self._guarded(self.poll)
        self._guarded(self._release)
        with contextlib.suppress(Exception):
            self._end_tasks(returncode, program_pid)
        self.state.peers = dict(self.board.peers)
        self.state.peer_notes = list(self.board.notes)
        self.state.own_tasks = [s["task"] for s in self.board.own.values()]
        for writer in self._writers.values():
            with contextlib.suppress(OSError):
                writer.close()
        if self.gpus is not None:
            self.state.nvml = self.gpus.close()
        return self.state

    def _guarded(self, work: Callable[[], None]) -> None:
        """Never raised (the final report reads it all anyway); a failure part-way marks
        what was written so far as not whole."""
        try:
            work()
        except Exception:
            self._not_whole()

    def _not_whole(self) -> None:
        """The files written and the stderr matched so far are done again at the end."""
        for program in self.state.programs.values():
            program.complete = False
        if self.gpus is not None:
            self.gpus.file.complete = False
        if self.state.stderr_scan is not None:
            self.state.stderr_scan.whole = False

    def poll(self) -> None:
        """Read the new events into the run state, then draw each view from it."""
        for pid, state in self.follower.poll().items():
            if state.kept.get("profile") is not None and not self._preloaded:
                self._preloaded = True  # a trace is coming: the picture will be drawn
                _preload()
            self._news(pid, state)
            for loop in state.loops.values():
                if loop.new:
                    self._draw_loop(pid, loop)
                    if loop is state.latest:
                        self._latest = loop
        if self.gpus is not None:
            wrote, idle = self.gpus.poll()
            self._dirty = self._dirty or wrote
            for gpu in idle:
                self._tell(None, gpu.told_wall_s, gpu.line(self.gpus.watch.window_s))
        if self.board.own:
            self.board.publish()
            for _, text, t in self.board.news():
                self._tell(next(iter(self.board.own)), t, text)
        if self.state.stderr_scan is not None:
            self.state.stderr_scan.poll()
        if self._dirty and time.monotonic() - self._last_flush >= TB_FLUSH_S:
            self.flush()

    def _end_tasks(self, returncode: int | None, program_pid: int | None) -> None:
        """How each cluster task's program ended: the program's exit status when the task
        is the program itself (its pid is the program's: the child of the holder of its
        process group, gpudiag.procs.shim), else whether its Python exit ran."""
        for pid in list(self.board.own):
            state = self.follower.states.get(pid)
            if pid == program_pid:
                how, normal = peers.how_ended(returncode)
            elif state is not None and state.exit is not None:
                how, normal = "its Python exit ran", True
            else:
                how, normal = "ended without its Python exit (a signal or a crash)", False
            self.board.end(pid, how, normal)
        self.board.publish()

    def flush(self) -> None:
        self._last_flush, self._dirty = time.monotonic(), False
        for writer in self._writers.values():
            writer.flush()
        if self.gpus is not None and self.gpus.writer is not None:
            self.gpus.writer.flush()

    def _writer(self, pid: int) -> EventWriter:
        if pid not in self._writers:
            program = self.state.programs.setdefault(pid, ProgramFile(run_tb_name(pid)))
            self._writers[pid] = EventWriter(self.run_dir / program.name)
            program.path = self._writers[pid].path
        return self._writers[pid]

    def _write_steps(self, pid: int, loop: Loop, steps: list[Step], *,
                     hold: bool = True) -> None:
        """Into the program's TensorBoard run as tbwrite.write_program would write them at
        the end, so that this file can be the final one (ProgramFile): the process's first
        loop gets the plain tags, the others theirs under their label; a step's time needs
        the next step's start, so the last step is held back until the next rows come (or
        the end, ``release``)."""
        label, shown = loop.label, self._shown_of(pid, loop)
        program = self.state.programs.setdefault(pid, ProgramFile(run_tb_name(pid)))
        prefix = program.prefixes.setdefault(label, "" if not program.prefixes else
                                             loop_prefix(label))
        seen = program.seen_index.get(label, -1)
        new = [st for st in steps if st.index > seen]
        if new:  # how far it got, now (a held step's time waits for the next step's start)
            program.tags.update(tbwrite.write_seen(self._writer(pid), new, prefix))
            program.seen_index[label] = max(st.index for st in new)
            self._dirty = True
        held, shown.held = shown.held, []
        if hold:  # a step's time is from its start to the next's
            steps, shown.held = [*held, *steps[:-1]], steps[-1:]
        else:
            steps = [*held, *steps]
        last = program.last_index.get(label, -1)
        # a row may come again for a step already written (a step function's last loss,
        # read at its end): only a loss that step did not have yet is written
        steps = [st for st in steps if st.index > last or (
            st.loss is not None and program.loss_index.get(label, -1) < st.index)]
        if not steps:
            return
        series = StepSeries(loop.kind, label, steps,
                            batch_size=loop.batch_size if loop.kind == "fit" else None)
        following = shown.held[0] if shown.held else None
        program.tags.update(tbwrite.write_series(self._writer(pid), series, prefix, following))
        program.steps[label] = program.steps.get(label, 0) + len(
            {st.index for st in steps if st.index > last})
        program.last_index[label] = max(last, *(st.index for st in steps))
        with_loss = [st.index for st in steps if st.loss is not None]
        if with_loss:
            program.loss_index[label] = max(program.loss_index.get(label, -1), *with_loss)
        self._dirty = True

    def _release(self) -> None:
        """The end: the steps held back (no next step: no step time, as at the end)."""
        for pid, state in self.follower.states.items():
            for loop in state.loops.values():
                shown = self._shown_of(pid, loop)
                if shown.held:
                    held, shown.held = shown.held, []
                    self._write_steps(pid, loop, held, hold=False)

    def _shown_of(self, pid: int, loop: Loop) -> _Shown:
        return self._shown.setdefault((pid, loop.kind, loop.name), _Shown())

    def status(self) -> str:
        """The terminal's status line (gpudiag.run.statusline): what was last seen."""
        parts = []
        latest = self._latest
        if latest is not None:
            parts.append(f"step {latest.done}")
            if latest.loss is not None:
                parts.append(f"loss {latest.loss:.4g}")
            if latest.rate:
                parts.append(latest.rate)
        if self.gpus is not None and self.gpus.util_percent:
            parts.append(" ".join(f"GPU{i} {u:.0f}%"
                                  for i, u in sorted(self.gpus.util_percent.items())))
        return " | ".join(parts)

    def _stuck_at_ln(self, pid: int, loop: Loop) -> None:
        """A loss at ln(classes) for the last LIVE_LN_WINDOW losses, said once per loop."""
        shown = self._shown_of(pid, loop)
        if shown.told_stuck or loop.first_loss is None:
            return
        text = stuck_at_ln_classes(
            "Model.fit" if loop.kind == "fit" else loop.label, loop.first_loss,
            loop.recent_losses, loop.done, *loop.classes)
        if text is not None:
            shown.told_stuck = True
            self._tell(pid, loop.new[-1].start_unix_s, text)

    def _tell(self, pid: int | None, t: float | None, text: str) -> None:
        """Said with the time; into the Text tab of the program's live file (of
        ``nvml/`` for what NVML found, ``pid`` None)."""
        stamp = time.strftime("%H:%M:%S", time.localtime(t or time.time()))
        line = f"{stamp} gpudiag{'' if pid is None else f' (pid {pid})'}: {text}"
        self.state.messages.append((t or time.time(), line))
        self.say(line)
        step = len(self.state.messages)
        if pid is None and self.gpus is not None:
            self.gpus.text(TAG_RUN_LIVE, line, step)
            if self.gpus.writer is not None:
                self.gpus.writer.flush()
        elif pid is not None:
            self._writer(pid).text(TAG_RUN_LIVE, line, step=step)
            self.state.programs[pid].texts.append((step, line))
            self._writer(pid).flush()

    def _news(self, pid: int, state: ProcessState) -> None:
        """What the process said this poll that is told or published: a cluster joined,
        a stall and its end (the stall as the run state holds it)."""
        for t, event in state.news:
            if isinstance(event, ev.ClusterJoin):
                self.board.join(pid, event)
            elif isinstance(event, lev.Stall) and state.stalls:
                self.board.stall(pid, state.stalls[-1])
                self._tell(pid, t, f"stalled: {describe_stall(state.stalls[-1])}"
                           + self.board.clause_for_stall(pid))
            elif isinstance(event, lev.StallEnd):
                self.board.stall_end(pid, event.after_s)
                self._tell(pid, t, f"steps again after a stall of {event.after_s:.1f} s")

    def _draw_loop(self, pid: int, loop: Loop) -> None:
        """One loop's new steps: into its TensorBoard run, the peers file, what is told."""
        self._write_steps(pid, loop, loop.new)
        self.board.steps(pid, loop.done, loop.last_end_unix_s)
        self._stuck_at_ln(pid, loop)
        shown = self._shown_of(pid, loop)
        bad = loop.bad_loss
        if bad is not None and not shown.told_bad_loss:
            shown.told_bad_loss = True
            self._tell(pid, bad.start_unix_s, f"the loss of {loop.name or loop.kind} is "
                       f"{bad.loss} at step {bad.index}: training has diverged (NaN/inf); "
                       "every later update is lost")
