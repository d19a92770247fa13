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
import json
import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag import nvml
from gpudiag.layout import (
    RUN_EVENTS_PREFIX,
    RUN_EVENTS_SUFFIX,
    RUN_STDERR,
    TAG_RUN_LIVE,
    run_tb_name,
)
from gpudiag.records.run import Step, StepSeries
from gpudiag.run import classcount, peers, tbwrite
from gpudiag.run import events as run_events
from gpudiag.run.livegpu import LiveGpus, NvmlFile
from gpudiag.run.stderrscan import StderrScan
from gpudiag.run.tbwrite import ProgramFile
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.run.live import describe_stall, stuck_at_ln_classes

POLL_S = 0.5
TB_FLUSH_S = 5.0  # TensorBoard reloads about every 30 s
STEP_KINDS = {"fit_steps": "fit", "function_steps": "function", "session_steps": "session"}


@dataclass
class _Follow:
    offset: int = 0
    pending: bytes = b""


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


class Live:
    def __init__(self, events_dir: Path, run_dir: Path, say: Callable[[str], None],
                 sampler: nvml.Sampler | None = None) -> None:
        self.events_dir = events_dir
        self.run_dir = run_dir
        self.say = say
        self.state = LiveState(stderr_scan=StderrScan(events_dir / RUN_STDERR))
        self.gpus = LiveGpus(sampler, run_dir) if sampler is not None else None
        self._files: dict[Path, _Follow] = {}
        self._writers: dict[int, EventWriter] = {}
        self._held: dict[tuple[int, str], list[Step]] = {}  # fit's last step, until the next
        self._bad_loss: set[tuple[int, str]] = set()
        # per loop: the class count and its evidence, the first and the recent losses
        self._classes: dict[tuple[int, str], tuple[int | None, str]] = {}
        self._losses: dict[tuple[int, str], tuple[float | None, deque[float]]] = {}
        self._stuck_told: set[tuple[int, str]] = set()
        self._batch: dict[int, int] = {}  # Keras fit's batch size per process
        self.board = peers.Board(run_dir)
        self._ppid: dict[int, int] = {}
        self._exited: set[int] = set()
        self._done: dict[tuple[int, str], tuple[int, float | None]] = {}  # steps, last start
        self._latest: tuple[int, float | None, str | None] | None = None  # for the status
        self._last_flush = -TB_FLUSH_S  # the first scalars are flushed at once
        self._dirty = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="gpudiag-live", daemon=True)

    def start(self) -> Live:
        self._thread.start()
        return self

    def stop(self, returncode: int | None = None) -> LiveState:
        """After the program ended (``returncode``: the program's; the sampler stopped):
        read what is left, publish how its cluster tasks ended, close the live
        TensorBoard files (the final report keeps those that hold it all)."""
        self._stop.set()
        if self._thread.ident is not None:  # started (a test may poll it by hand)
            self._thread.join(10)
        if self._thread.is_alive():  # still in a poll: what it wrote is not trusted
            self._not_whole()
        self._guarded(self.poll)
        self._guarded(self._release)
        with contextlib.suppress(Exception):
            self._end_tasks(returncode)
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

    def _loop(self) -> None:
        from gpudiag.tb import breakdown

        with contextlib.suppress(Exception):  # the report's picture, drawn at the end
            breakdown.preload()
        while not self._stop.wait(POLL_S):
            self._guarded(self.poll)

    def _new_events(self) -> list[dict[str, Any]]:
        out = []
        for path in sorted(self.events_dir.glob(f"{RUN_EVENTS_PREFIX}*{RUN_EVENTS_SUFFIX}")):
            follow = self._files.setdefault(path, _Follow())
            with path.open("rb") as f:
                f.seek(follow.offset)
                data = f.read()
            follow.offset += len(data)
            *lines, follow.pending = (follow.pending + data).split(b"\n")
            for line in lines:
                with contextlib.suppress(ValueError):
                    event = json.loads(line)
                    if isinstance(event, dict) and "kind" in event and "pid" in event:
                        out.append(event)
        return out

    def poll(self) -> None:
        for event in self._new_events():
            kind, pid = event["kind"], int(event["pid"])
            if kind in STEP_KINDS:
                self._steps(pid, event)
            elif kind == "fit_begin":
                if isinstance(event.get("batch_size"), int):
                    self._batch[pid] = event["batch_size"]
                self._classes[(pid, "fit")] = classcount.fit_classes(
                    event.get("output_width"), event.get("loss"))
                self._losses.pop((pid, "fit"), None)  # a new fit: its own losses
            elif kind == "function" and event.get("function"):
                self._classes[(pid, str(event["function"]))] = \
                    classcount.function_classes(event)
            elif kind == "stall":
                self.board.stall(pid, event)
                self._tell(pid, event.get("t"), f"stalled: {describe_stall(event)}"
                           + self.board.clause_for_stall(pid))
            elif kind == "stall_end":
                self.board.stall_end(pid, event)
                self._tell(pid, event.get("t"), f"steps again after a stall of "
                           f"{event.get('after_s', 0):.1f} s")
            elif kind == "cluster_join":
                self.board.join(pid, event)
            elif kind == "process" and isinstance(event.get("ppid"), int):
                self._ppid[pid] = event["ppid"]
            elif kind == "exit":
                self._exited.add(pid)
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

    def _end_tasks(self, returncode: int | None) -> None:
        """How each cluster task's program ended: the program's exit status when the task
        is the program itself, else whether its Python exit ran."""
        for pid in list(self.board.own):
            if self._ppid.get(pid) == os.getpid():
                how, normal = peers.how_ended(returncode)
            elif pid in self._exited:
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

    def _write_steps(self, pid: int, label: str, kind: str, steps: list[Step], *,
                     hold: bool = True) -> None:
        """Into the program's TensorBoard run as tbwrite.write_program would write them at
        the end, so that this file can be the final one (ProgramFile): the process's first
        loop gets the plain tags, the others theirs under their label; a fit step's time
        needs the next step's start, so the last fit step is held back until the next rows
        come (or the end, ``release``)."""
        loop = (pid, label)
        program = self.state.programs.setdefault(pid, ProgramFile(run_tb_name(pid)))
        prefix = program.prefixes.setdefault(label, "" if not program.prefixes else
                                             tbwrite._slug(label))
        held = self._held.pop(loop, [])
        if kind == "fit" and hold:
            steps, self._held[loop] = [*held, *steps[:-1]], steps[-1:]
        else:
            steps = [*held, *steps]
        last = program.last_index.get(label, -1)
        # a row may come again for a step already written (a step function's last loss,
        # read at its end): only a loss that step did not have yet is written
        steps = [st for st in steps if st.index > last or (
            st.loss is not None and program.loss_index.get(label, -1) < st.index)]
        if not steps:
            return
        series = StepSeries(kind, label, steps,
                            batch_size=self._batch.get(pid) if kind == "fit" else None)
        following = self._held[loop][0] if self._held.get(loop) else None
        program.tags.update(tbwrite.write_series(self._writer(pid), series, prefix, following))
        program.steps[label] = program.steps.get(label, 0) + len(
            {st.index for st in steps if st.index > last})
        program.last_index[label] = max(last, *(st.index for st in steps))
        with_loss = [st.index for st in steps if st.loss is not None]
        if with_loss:
            program.loss_index[label] = max(program.loss_index.get(label, -1), *with_loss)
        self._dirty = True

    def _release(self) -> None:
        """The end: the fit steps held back (no next step: no step time, as at the end)."""
        for (pid, label), held in list(self._held.items()):
            del self._held[(pid, label)]
            self._write_steps(pid, label, "fit", held, hold=False)

    def _note_progress(self, loop: tuple[int, str], steps: list[Any],
                       batch_size: int | None) -> None:
        """The status line's step, loss and rate: the highest step seen (a row may come
        again later with its loss), the rate over the time between the last step starts
        of two polls (examples/s where the batch size is known)."""
        done, start = self._done.get(loop, (0, None))
        last = max(steps, key=lambda s: s.index)
        now_done = max(done, last.index + last.count)
        rate = self._latest[2] if self._latest else None
        if start is not None and last.start_unix_s is not None and \
                last.start_unix_s > start and now_done > done:
            per_s = (now_done - done) / (last.start_unix_s - start)
            rate = f"{batch_size * per_s:.0f} examples/s" if batch_size else \
                f"{per_s:.1f} steps/s"
        self._done[loop] = (now_done, max(last.start_unix_s or 0.0, start or 0.0) or None)
        with_loss = [s for s in steps if s.loss is not None and s.index + s.count >= done]
        loss = max(with_loss, key=lambda s: s.index).loss if with_loss else \
            (self._latest[1] if self._latest else None)
        self._latest = (now_done, loss, rate)

    def status(self) -> str:
        """The terminal's status line (gpudiag.run.statusline): what was last seen."""
        parts = []
        if self._latest is not None:
            steps, loss, rate = self._latest
            parts.append(f"step {steps}")
            if loss is not None:
                parts.append(f"loss {loss:.4g}")
            if rate:
                parts.append(rate)
        if self.gpus is not None and self.gpus.util_percent:
            parts.append(" ".join(f"GPU{i} {u:.0f}%"
                                  for i, u in sorted(self.gpus.util_percent.items())))
        return " | ".join(parts)

    def _stuck_at_ln(self, pid: int, key: str, steps: list[Any]) -> None:
        """A loss at ln(classes) for the last LIVE_LN_WINDOW losses, said once per loop."""
        if (pid, key) in self._stuck_told:
            return
        first, recent = self._losses.setdefault((pid, key), (None, deque(maxlen=50)))
        for st in steps:
            if st.loss is not None and math.isfinite(st.loss):
                first = st.loss if first is None else first
                recent.append(st.loss)
        self._losses[(pid, key)] = (first, recent)
        classes, source = self._classes.get((pid, key), (None, ""))
        done = self._done.get((pid, key), (0, None))[0]
        text = None if first is None else stuck_at_ln_classes(
            "Model.fit" if key == "fit" else f"tf.function {key}", first, recent, done,
            classes, source)
        if text is not None:
            self._stuck_told.add((pid, key))
            self._tell(pid, steps[-1].start_unix_s, text)

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

    def _steps(self, pid: int, event: dict[str, Any]) -> None:
        kind = STEP_KINDS[event["kind"]]
        key = str(event.get("function") or event.get("group") or kind)
        rows = [r for r in event.get("rows") or [] if isinstance(r, dict) and "i" in r]
        steps = run_events._series_steps(rows, kind)
        if not steps:
            return
        label = run_events.series_label(
            kind, event.get("function") if kind == "function" else event.get("group"),
            event.get("fetches"))
        self._write_steps(pid, label, kind, steps)
        ends = [st.start_unix_s + (st.duration_s or 0.0) for st in steps
                if st.start_unix_s is not None]
        self.board.steps(pid, max(st.index + 1 for st in steps), max(ends) if ends else None)
        self._note_progress((pid, key), steps, self._batch.get(pid) if kind == "fit" else None)
        self._stuck_at_ln(pid, key, steps)
        bad = next((s for s in steps if s.loss is not None and not math.isfinite(s.loss)),
                   None)
        if bad is not None and (pid, key) not in self._bad_loss:
            self._bad_loss.add((pid, key))
            self._tell(pid, bad.start_unix_s, f"the loss of {key} is {bad.loss} at step "
                       f"{bad.index}: training has diverged (NaN/inf); every later update "
                       "is lost")
