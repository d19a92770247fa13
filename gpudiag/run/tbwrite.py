"""The program's TensorBoard run: loss, metrics, step time (parent side, no TensorFlow).

One run per TensorFlow process, ``program-<pid>/`` (layout.run_tb_name), the same
directory the profiler window wrote its trace into (plugins/profile/), so TensorBoard
shows the program's scalars and its trace side by side. Tags (layout.TAG_RUN_*):
``program/loss`` and ``program/<metric>`` per step (Keras: its running means, as Keras
reports them), ``program/step_time_s`` (interval between step starts for fit, the call's
time for a step tf.function or Session.run) and ``program/examples_per_s`` where the batch
size is known. The loop with the most steps gets these tags; any other loop gets them
under ``program/<loop>/``.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpudiag.layout import (
    TAG_RUN_EXAMPLES_PER_S,
    TAG_RUN_LOSS,
    TAG_RUN_METRIC,
    TAG_RUN_STEP_TIME,
    run_tb_name,
)
from gpudiag.run.records import ProcessObservation, StepSeries
from gpudiag.tb.writer import EventWriter


def _slug(label: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.]+", "_", label).strip("_")[:40]


def _tag(tag: str, prefix: str) -> str:
    return tag.replace("program/", f"program/{prefix}/", 1) if prefix else tag


def write_series(writer: EventWriter, series: StepSeries, prefix: str) -> list[str]:
    tags: set[str] = set()
    by_index = {s.index: s for s in series.steps}
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
        if series.kind == "fit":
            nxt = by_index.get(s.index + 1)
            step_s = (nxt.start_unix_s - s.start_unix_s) if nxt and nxt.start_unix_s and \
                s.start_unix_s and nxt.epoch == s.epoch else None
        if step_s is not None and not s.traced and step_s > 0:
            writer.scalar(_tag(TAG_RUN_STEP_TIME, prefix), step_s, s.index, wall)
            tags.add(_tag(TAG_RUN_STEP_TIME, prefix))
            if series.batch_size:
                writer.scalar(_tag(TAG_RUN_EXAMPLES_PER_S, prefix), series.batch_size / step_s,
                              s.index, wall)
                tags.add(_tag(TAG_RUN_EXAMPLES_PER_S, prefix))
    return sorted(tags)


def write_program(run_dir: Path, obs: ProcessObservation, warmup: int) -> dict[str, object]:
    """Scalars of every training loop of one process; returns the run and its tags."""
    series = sorted(obs.series, key=lambda s: -len(s.steps))
    if not series:
        return {"run": None, "tags": []}
    name = run_tb_name(obs.pid)
    tags: list[str] = []
    with EventWriter(run_dir / name) as writer:
        for n, s in enumerate(series):
            tags += write_series(writer, s, "" if n == 0 else _slug(s.label))
    return {"run": name, "tags": tags}
