"""The program's TensorBoard run: loss, metrics, step time (parent side, no TensorFlow).

One run per TensorFlow process, ``program-<pid>/`` (layout.run_tb_name), the same
directory the profiler window wrote its trace into (plugins/profile/), so TensorBoard
shows the program's scalars and its trace side by side. Tags (layout.TAG_RUN_*):
``program/loss`` and ``program/<metric>`` per step (Keras: its running means, as Keras
reports them), ``program/step_time_s`` (the interval between a step's start and the next's, per
training step: run.throughput's step time, for every kind of loop) and
``program/examples_per_s`` where the batch
size is known, ``program/step`` (each step's index, written as the step is seen: how far
the loop got while its last step's time waits for the next start). The loop with the most
steps gets these tags; any other loop gets them under ``program/<loop>/``.

While the program runs, gpudiag.run.live writes the same scalars as the steps come into a
file of that run (a ProgramFile); at the end that file is kept as the final one when it
holds what ``write_program`` would write (every loop, its tag prefix and its step
count), so that a long job's steps are not written a second time after the program
ended: the finish time stays bounded. Otherwise it is written again here, whole.

HParams (``write_hparams``): each TensorFlow process is one trial
(``layout.trial_name(<run dir>, program-<pid>)``), its session in its own run: the
hyperparameters as the hooks observed them (``layout.RUN_HPARAMS``: the program, the
strategy and its replicas, the batch, the Keras optimizer and learning rate, the steps
seen, the model's class; a value not observed is left out) and its metrics as level lines
(the value at the first and at the last step, as scaling's): the median step period and
examples/s of its longest loop (verdicts.run.throughput.loop_timing, the report's
numbers), its final loss and accuracy (mean of the last 10 steps, as scaling's). No
experiment of its own: TensorBoard reads one experiment per logdir, the first it finds,
so a `run` experiment would hide a scaling run's per-device columns in a logdir holding
both. Alone, TensorBoard builds the experiment from the trials (every hyperparameter
they hold, every scalar tag of their runs as a metric, by_config/ first); beside a
scaling run, scaling's experiment lists the program's columns too (gpudiag.tb.hparams).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from gpudiag import layout
from gpudiag.layout import (
    TAG_RUN_EXAMPLES_PER_S,
    TAG_RUN_LIVE,
    TAG_RUN_LOSS,
    TAG_RUN_METRIC,
    TAG_RUN_STEP,
    TAG_RUN_STEP_TIME,
    run_tb_name,
)
from gpudiag.records.run import ProcessObservation, Step, StepSeries
from gpudiag.tb.writer import EventWriter
from gpudiag.verdicts.run.progress import ACCURACY_KEYS
from gpudiag.verdicts.run.throughput import loop_timing

FINAL_STEPS = 10  # final loss and accuracy: the mean of this many last steps


@dataclass
class ProgramFile:
    """A program's TensorBoard run as the live thread wrote it."""

    name: str  # the run's directory (layout.run_tb_name)
    path: Path | None = None  # the live event file, once opened
    prefixes: dict[str, str] = field(default_factory=dict)  # loop label -> prefix, as seen
    steps: dict[str, int] = field(default_factory=dict)  # loop label -> steps written
    last_index: dict[str, int] = field(default_factory=dict)  # loop label -> last step
    loss_index: dict[str, int] = field(default_factory=dict)  # ... -> last step with a loss
    seen_index: dict[str, int] = field(default_factory=dict)  # ... -> last step seen
    tags: set[str] = field(default_factory=set)
    texts: list[tuple[int, str]] = field(default_factory=list)  # (step, line) told into it
    complete: bool = True  # False: a poll failed part-way (the end writes it again)

    def holds(self, series: list[StepSeries]) -> bool:
        """Whether it has what write_program writes for these loops (most steps first)."""
        want = {s.label: ("" if n == 0 else layout.loop_prefix(s.label), len(s.steps))
                for n, s in enumerate(series)}
        return self.complete and self.path is not None and want == {
            label: (prefix, self.steps.get(label, 0)) for label, prefix in self.prefixes.items()}




def write_series(writer: EventWriter, series: StepSeries, prefix: str,
                 following: Step | None = None) -> list[str]:
    """Every step's scalars; ``following``: the step after the last, not written here
    (a step's time is from its start to the next's)."""
    tags: set[str] = set()
    by_index = {s.index: s for s in [*series.steps, *([following] if following else [])]}
    for s in series.steps:
        wall = s.start_unix_s
        if s.loss is not None:
            writer.scalar(layout.loop_tag(TAG_RUN_LOSS, prefix), s.loss, s.index, wall)
            tags.add(layout.loop_tag(TAG_RUN_LOSS, prefix))
        for name, value in s.metrics.items():
            tag = layout.loop_tag(TAG_RUN_METRIC.format(name=name), prefix)
            writer.scalar(tag, value, s.index, wall)
            tags.add(tag)
        # the period from this step's start to the next's (run.throughput's step time), per
        # training step (a call of steps_per_execution = N steps: over N)
        nxt = by_index.get(s.index + 1)
        step_s = (nxt.start_unix_s - s.start_unix_s) / s.per_call if nxt and \
            nxt.start_unix_s and s.start_unix_s and nxt.epoch == s.epoch else None
        if step_s is not None and not s.traced and step_s > 0:
            writer.scalar(layout.loop_tag(TAG_RUN_STEP_TIME, prefix), step_s, s.index, wall)
            tags.add(layout.loop_tag(TAG_RUN_STEP_TIME, prefix))
            if series.batch_size:
                writer.scalar(layout.loop_tag(TAG_RUN_EXAMPLES_PER_S, prefix),
                              series.batch_size / step_s, s.index, wall)
                tags.add(layout.loop_tag(TAG_RUN_EXAMPLES_PER_S, prefix))
    return sorted(tags)


def write_seen(writer: EventWriter, steps: Sequence[Step], prefix: str) -> list[str]:
    """Each step's index under TAG_RUN_STEP, at its start: how far the loop got."""
    tag = layout.loop_tag(TAG_RUN_STEP, prefix)
    for s in steps:
        writer.scalar(tag, float(s.index), s.index, s.start_unix_s)
    return [tag] if steps else []


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
            prefix = "" if n == 0 else layout.loop_prefix(s.label)
            tags += write_series(writer, s, prefix)
            tags += write_seen(writer, s.steps, prefix)
        for step, line in live.texts if live is not None else []:
            writer.text(TAG_RUN_LIVE, line, step=step)
    if live is not None and live.path is not None:
        with contextlib.suppress(OSError):
            live.path.unlink()
    return {"run": name, "tags": sorted(set(tags)), "written": "end"}


def _program(argv: list[str]) -> str:
    """The script or module the process ran (``train.py``, ``-m pkg.train``)."""
    for n, arg in enumerate(argv[1:], 1):
        if arg == "-m" and n + 1 < len(argv):
            return f"-m {argv[n + 1]}"
        if arg == "-c":
            return "-c"
        if not arg.startswith("-"):
            return Path(arg).name
    return Path(argv[0]).name if argv else "?"


def hparams_of(obs: ProcessObservation) -> dict[str, bool | int | float | str]:
    """The process's hyperparameters as observed (``layout.RUN_HPARAMS``), from its
    longest training loop and its strategy; what was not observed is left out."""
    top = max(obs.series, key=lambda s: len(s.steps), default=None)
    facts = top.facts if top is not None else {}
    strategy = obs.strategies[-1] if obs.strategies else None
    name = facts.get("strategy") or (strategy.class_name if strategy else None)
    replicas = facts.get("replicas") or (strategy.num_replicas if strategy else None) \
        or (1 if name is None else None)
    batch = top.batch_size if top is not None else None
    found: dict[str, object] = {
        layout.HPARAM_PROGRAM: _program(obs.argv),
        layout.HPARAM_STRATEGY: "none" if name is None or str(name).startswith("_Default")
        else name,
        layout.HPARAM_DEVICES: replicas, layout.HPARAM_GLOBAL_BATCH: batch,
        layout.HPARAM_BATCH_PER_DEVICE: batch // replicas
        if isinstance(batch, int) and isinstance(replicas, int) and replicas > 0
        and batch % replicas == 0 else None,
        layout.HPARAM_OPTIMIZER: facts.get("optimizer"),
        layout.HPARAM_LEARNING_RATE: facts.get("learning_rate"),
        layout.HPARAM_STEPS: sum(s.count for s in top.steps) if top and top.steps else None,
        layout.HPARAM_MODEL: facts.get("model")}
    return {k: v for k, v in found.items() if isinstance(v, bool | int | float | str)}


def _tail_mean(values: list[float]) -> float | None:
    tail = [v for v in values[-FINAL_STEPS:] if math.isfinite(v)]
    return sum(tail) / len(tail) if tail else None


def metrics_of(obs: ProcessObservation, warmup: int) -> dict[str, float]:
    """The trial's metrics by tag (``gpudiag.tb.hparams.METRICS``) of its longest loop."""
    top = max(obs.series, key=lambda s: len(s.steps), default=None)
    if top is None:
        return {}
    timing = loop_timing(obs, top, warmup) or {}
    steps = sorted(top.steps, key=lambda s: s.index)
    accuracy = next((k for k in ACCURACY_KEYS if any(k in s.metrics for s in steps)), None)
    found = {
        layout.TAG_BY_CONFIG_STEP_TIME: timing.get("step_s_median"),
        layout.TAG_BY_CONFIG_EXAMPLES_PER_S: timing.get("examples_per_s"),
        layout.TAG_BY_CONFIG_FINAL_LOSS: _tail_mean([s.loss for s in steps
                                                     if s.loss is not None]),
        layout.TAG_BY_CONFIG_FINAL_ACCURACY: None if accuracy is None else _tail_mean(
            [s.metrics[accuracy] for s in steps if accuracy in s.metrics])}
    return {tag: float(v) for tag, v in found.items() if isinstance(v, int | float)}


def write_hparams(run_dir: Path, processes: list[ProcessObservation], warmup: int) -> None:
    """One HParams trial per process that trained: a session in ``program-<pid>/``, its
    metrics as level lines."""
    trained = [o for o in processes if o.series]
    if not trained:
        return
    for obs in trained:
        trial = hparams_of(obs)
        steps = [s.index for s in max(obs.series, key=lambda s: len(s.steps)).steps]
        span = sorted({min(steps, default=0), max(steps, default=0)})
        with EventWriter(run_dir / run_tb_name(obs.pid)) as w:
            w.hparams_session(layout.trial_name(run_dir.name, run_tb_name(obs.pid)), trial,
                              ok=obs.crash is None)
            for tag, value in metrics_of(obs, warmup).items():
                for step in span:
                    w.scalar(tag, value, step)
