"""TensorBoard writing in the parent process (no TensorFlow).

Text, scalars, PNG images, the HParams plugin's experiment and sessions and the custom
scalars plugin's layout are written as ordinary TensorBoard event files with
tensorboard's own summary builders (the plugins' TF-free ``*_pb`` functions and
metadata) and record framing (``RecordWriter``), so `gpudiag monitor` and the report
writer work where TensorFlow is absent. Every summary is a plugin tensor, the form
``tf.summary`` writes in the training child, so a reader reads every tag the same way
(EventAccumulator's ``Tensors``; gpudiag/layout/__init__.py). tensorboard's ``EventFileWriter``
and ``tensorboard.summary.Writer`` are not used: they reach files through
``tensorboard.compat.tf``, which imports the whole of TensorFlow whenever it is installed
(seconds of start-up and its log noise in the parent). Nor is ``tensorboard.summary.v1``:
importing it imports TensorFlow too. The server is gpudiag/tb/serve.py's.
"""

from __future__ import annotations

import itertools
import os
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.plugins.image import metadata as image_metadata
from tensorboard.plugins.scalar.summary_v2 import scalar_pb
from tensorboard.plugins.text.summary_v2 import text_pb
from tensorboard.summary.writer.record_writer import RecordWriter
from tensorboard.util import tensor_util

from gpudiag.files import readable

_file_counter = itertools.count()


@dataclass(frozen=True)
class Chart:
    """A Custom Scalars chart: every (run, tag) whose tag matches one of the regexes."""

    title: str
    tag_regexes: tuple[str, ...]


@dataclass(frozen=True)
class HParam:
    """An HParams dashboard column: a number or a string, and whether it differs between
    the trials (those are listed first)."""

    name: str
    numeric: bool
    differs: bool


@dataclass(frozen=True)
class ChartGroup:
    """A Custom Scalars category."""

    title: str
    charts: tuple[Chart, ...]
    closed: bool = False


class EventWriter:
    """A new event file in one TensorBoard run directory. A context manager."""

    def __init__(self, run_dir: Path) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        name = (f"events.out.tfevents.{int(time.time()):010d}.{socket.gethostname()}."
                f"{os.getpid()}.{next(_file_counter)}.gpudiag")
        self.path = run_dir / name
        self._writer = RecordWriter(self.path.open("wb"))
        self._write(event_pb2.Event(wall_time=time.time(), file_version="brain.Event:2"))
        self.flush()

    def _write(self, event: event_pb2.Event) -> None:
        self._writer.write(event.SerializeToString())

    def _emit(self, summary: summary_pb2.Summary, step: int, wall_time: float | None) -> None:
        self._write(event_pb2.Event(wall_time=wall_time or time.time(), step=int(step),
                                    summary=summary))

    def text(self, tag: str, markdown: str, step: int = 0) -> None:
        """A text summary; TensorBoard's Text tab renders it as markdown."""
        self._emit(text_pb(tag, readable(markdown)), step, None)

    def scalar(self, tag: str, value: float, step: int, wall_time: float | None = None) -> None:
        """A scalar (a float32 scalar-plugin tensor, as ``tf.summary.scalar`` writes)."""
        self._emit(scalar_pb(tag, float(value)), step, wall_time)

    def png(self, tag: str, png_bytes: bytes, width: int, height: int, step: int = 0) -> None:
        """A PNG image for TensorBoard's Images tab: the image plugin's string tensor
        ``[width, height, png]``, as ``tf.summary.image`` writes it."""
        summary = summary_pb2.Summary()
        meta = image_metadata.create_summary_metadata(display_name=tag, description="")
        tensor = tensor_util.make_tensor_proto([str(width).encode(), str(height).encode(),
                                               png_bytes])
        summary.value.add(tag=tag, metadata=meta, tensor=tensor)
        self._emit(summary, step, None)

    def custom_scalars(self, groups: Sequence[ChartGroup]) -> None:
        """The Custom Scalars dashboard's layout: one category per group, one multi-line
        chart per chart (every (run, tag) whose tag matches one of its regexes). The
        plugin merges the layouts of every run, categories by title, equal charts once."""
        from tensorboard.plugins.custom_scalar import layout_pb2
        from tensorboard.plugins.custom_scalar import metadata as cs_metadata

        layout = layout_pb2.Layout(category=[
            layout_pb2.Category(title=g.title, closed=g.closed, chart=[
                layout_pb2.Chart(title=c.title, multiline=layout_pb2.MultilineChartContent(
                    tag=list(c.tag_regexes)))
                for c in g.charts])
            for g in groups])
        summary = summary_pb2.Summary()
        summary.value.add(tag=cs_metadata.CONFIG_SUMMARY_TAG,
                          metadata=cs_metadata.create_summary_metadata(),
                          tensor=tensor_util.make_tensor_proto(layout.SerializeToString()))
        self._emit(summary, 0, None)

    def hparams_experiment(self, hparams: Sequence[HParam],
                           metrics: Sequence[tuple[str, str]]) -> None:
        """The HParams dashboard's experiment: the hyperparameters shown and the metrics
        ((tag, display name), in order), each read from the sessions' runs. The
        dashboard lists hyperparameters that differ first, then by name, and ticks the
        first five of each by default."""
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2

        experiment = api_pb2.Experiment(
            hparam_infos=[api_pb2.HParamInfo(
                name=h.name, differs=h.differs,
                type=api_pb2.DATA_TYPE_FLOAT64 if h.numeric else api_pb2.DATA_TYPE_STRING)
                for h in hparams],
            metric_infos=[api_pb2.MetricInfo(name=api_pb2.MetricName(tag=tag),
                                             display_name=name) for tag, name in metrics],
            time_created_secs=time.time())
        self._hparams_plugin(metadata.EXPERIMENT_TAG,
                             plugin_data_pb2.HParamsPluginData(experiment=experiment))

    def hparams_session(self, trial: str, hparams: Mapping[str, bool | int | float | str],
                        *, ok: bool) -> None:
        """This run is one HParams session of trial ``trial``: its hyperparameter values
        and how it ended (its metrics are this run's scalars)."""
        from tensorboard.plugins.hparams import api_pb2, metadata, plugin_data_pb2
        from tensorboard.plugins.hparams import summary_v2 as hp

        self._emit(hp.hparams_pb(dict(hparams), trial_id=trial), 0, None)
        end = plugin_data_pb2.SessionEndInfo(
            status=api_pb2.STATUS_SUCCESS if ok else api_pb2.STATUS_FAILURE,
            end_time_secs=time.time())
        self._hparams_plugin(metadata.SESSION_END_INFO_TAG,
                             plugin_data_pb2.HParamsPluginData(session_end_info=end))

    def _hparams_plugin(self, tag: str, plugin_data: Any) -> None:
        """One HParams plugin record (experiment or session end): metadata, no value."""
        from tensorboard.plugins.hparams import metadata

        summary = summary_pb2.Summary()
        summary.value.add(tag=tag, metadata=metadata.create_summary_metadata(plugin_data),
                          tensor=metadata.NULL_TENSOR)
        self._emit(summary, 0, None)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()

    def __enter__(self) -> EventWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
