"""The program's TensorBoard run: loss, metrics, step time (parent side, no TensorFlow).

One run per TensorFlow process, ``program-<pid>/`` (layout.run_tb_name), the same
directory the profiler window wrote its trace into (plugins/profile/), so TensorBoard
shows the program's scalars and its trace side by side. Tags (layout.TAG_RUN_*):
``program/loss`` and ``program/<metric>`` per step (Keras: its running means, as Keras
reports them), ``program/step_time_s`` (interval between step starts for fit, the call's
time for a step tf.function or Session.run) and ``program/examples_per_s`` where the batch
size is known. The loop with the most steps gets these tags; any other loop gets them
under ``program/<loop>/``.

While the program runs, gpudiag.run.live writes the same scalars as the steps come into a
file of that run (a ProgramFile); at the end that file is kept as the final one when it
holds what ``write_program`` would write (every loop, its tag prefix and its step
count), so that a long job's steps are not written a second time after the program
ended: the finish time stays bounded. Otherwise it is written again here, whole.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from gpudiag.layout import (
    TAG_RUN_EXAMPLES_PER_S,
    TAG_RUN_LIVE,
    TAG_RUN_LOSS,
    TAG_RUN_METRIC,
    TAG_RUN_STEP_TIME,
    run_tb_name,
)
from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.tb.writer import EventWriter


@dataclass
class ProgramFile:
    """A program's TensorBoard run as the live thread wrote it."""

    name: str  # the run's directory (layout.run_tb_name)
    path: Path | None = None  # the live event file, once opened
    prefixes: dict[str, str] = field(default_factory=dict)  # loop label -> prefix, as seen
    steps: dict[str, int] = field(default_factory=dict)  # loop label -> steps written
    last_index: dict[str, int] = field(default_factory=dict)  # loop label -> last step
    loss_index: dict[str, int] = field(default_factory=dict)  # ... -> last step with a loss
    tags: set[str] = field(default_factory=set)
    texts: list[tuple[int, str]] = field(default_factory=list)  # (step, line) told into it
    complete: bool = True  # False: a poll failed part-way (the end writes it again)

    def holds(self, series: list[StepSeries]) -> bool:
        """Whether it has what write_program writes for these loops (most steps first)."""
        want = {s.label: ("" if n == 0 else _slug(s.label), len(s.steps))
                for n, s in enumerate(series)}
        return self.complete and self.path is not None and want == {
            label: (prefix, self.steps.get(label, 0)) for label, prefix in self.prefixes.items()}


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", label).strip("_")[:40]


def _tag(tag: str, prefix: str) -> str:
    return tag.replace("program/", f"program/{prefix}/", 1) if prefix else tag


def write_series(writer: EventWriter, series: StepSeries, prefix: str,
                 following: Step | None = None) -> list[str]:
    """Every step's scalars; ``following``: the step after the last, not written here
    (a fit step's time is from its start to the next's)."""
    tags: set[str] = set()
    by_index = {s.index: s for s in [*series.steps, *([following] if following else [])]}
    for s in series.steps:
        wall = s.start_unix_s
        if s.loss is not None:
            writer.scalar(_tag(TAG_RUN_LOSS, prefix), s.loss, s.index, wall)
            tags.add(_tag(TAG_RUN_LOSS, prefix))
        for name, value in s.metrics.items():
            tag = _tag(TAG_RUN_METRIC.format(name=name), prefix)
            writer.scalar(tag, value, s.index, wall)
            tags.add(tag)
        step_s = s.duration_s
        if series.kind == "fit":  # per training step: a call of steps_per_execution over N
            nxt = by_index.get(s.index + 1)
            step_s = (nxt.start_unix_s - s.start_unix_s) / s.per_call if nxt and \
                nxt.start_unix_s and s.start_unix_s and nxt.epoch == s.epoch else None
        if step_s is not None and not s.traced and step_s > 0:
            writer.scalar(_tag(TAG_RUN_STEP_TIME, prefix), step_s, s.index, wall)
            tags.add(_tag(TAG_RUN_STEP_TIME, prefix))
            if series.batch_size:
                writer.scalar(_tag(TAG_RUN_EXAMPLES_PER_S, prefix), series.batch_size / step_s,
                              s.index, wall)
                tags.add(_tag(TAG_RUN_EXAMPLES_PER_S, prefix))
    return sorted(tags)


def write_program(run_dir: Path, obs: ProcessObservation,
                  live: ProgramFile | None = None) -> dict[str, object]:
    """Scalars of every training loop of one process; returns the run, its tags and
    whether the live file was kept (``live``: what the live thread wrote; a live file
    that does not hold it all is replaced, its lines of the Text tab kept)."""
    series = sorted(obs.series, key=lambda s: -len(s.steps))
    name = run_tb_name(obs.pid)
    if live is not None and live.holds(series):
        return {"run": name, "tags": sorted(live.tags), "written": "live"}
    if not series and (live is None or live.path is None):
        return {"run": None, "tags": []}
    tags: list[str] = []
    with EventWriter(run_dir / name) as writer:
        for n, s in enumerate(series):
            tags += write_series(writer, s, "" if n == 0 else _slug(s.label))
        for step, line in live.texts if live is not None else []:
            writer.text(TAG_RUN_LIVE, line, step=step)
    if live is not None and live.path is not None:
        with contextlib.suppress(OSError):
            live.path.unlink()
    return {"run": name, "tags": tags, "written": "end"}
