"""The format contract (gpudiag/layout.py) and the typed parent/child records
(gpudiag/records/training.py): round trips through JSON and through real event files."""

from __future__ import annotations

from helpers import read_scalars

from gpudiag import layout
from gpudiag.tb.writer import EventWriter

# ------------------------------------------------------------------ event files


def test_parent_event_files_hold_plugin_tensors_only(tmp_path) -> None:
    """Scalars, text and images from the parent are read the way tf.summary's are."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    run = tmp_path / "run"
    png = b"\x89PNG\r\n\x1a\n fake"
    with EventWriter(run) as w:
        for step, value in ((1, 10.0), (2, 19.5), (4, 36.25)):
            w.scalar(layout.TAG_BY_CONFIG_EXAMPLES_PER_S, value, step)
        w.text(layout.TAG_SCALING_TABLE, "| a |\n|---|\n| 1 |")
        w.png(layout.TAG_SCALING_PLOT, png, width=90, height=36)
    acc = EventAccumulator(str(run), size_guidance={"tensors": 0})
    acc.Reload()
    assert acc.Tags()["scalars"] == [] and acc.Tags()["images"] == []  # no legacy values
    scalars = read_scalars(run)
    assert list(scalars) == ["by_config/examples_per_s"]
    assert [(e.step, e.value) for e in scalars["by_config/examples_per_s"]] == \
        [(1, 10.0), (2, 19.5), (4, 36.25)]

    def plugin(tag: str) -> str:
        return acc.SummaryMetadata(tag).plugin_data.plugin_name

    assert plugin(layout.TAG_SCALING_TABLE) == "text"
    (text,) = acc.Tensors(layout.TAG_SCALING_TABLE)
    assert tensor_util.make_ndarray(text.tensor_proto).item() == b"| a |\n|---|\n| 1 |"
    assert plugin(layout.TAG_SCALING_PLOT) == "images"
    (image,) = acc.Tensors(layout.TAG_SCALING_PLOT)
    assert list(tensor_util.make_ndarray(image.tensor_proto)) == [b"90", b"36", png]


def test_hparams_and_custom_scalars_read_back_with_the_plugins_parsers(tmp_path) -> None:
    """The parent's HParams experiment and session and the Custom Scalars layout, written
    without TensorFlow, parse with the plugins' own metadata readers."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.custom_scalar import layout_pb2
    from tensorboard.plugins.custom_scalar import metadata as cs_metadata
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams import metadata as hp_metadata
    from tensorboard.util import tensor_util

    from gpudiag.tb import views as tbviews
    from gpudiag.tb.writer import HParam

    with EventWriter(tmp_path / "report") as w:
        w.hparams_experiment([HParam("devices", numeric=True, differs=True),
                              HParam("model", numeric=False, differs=False)],
                             [(layout.TAG_BY_CONFIG_EXAMPLES_PER_S, "examples/s (median)")])
        w.custom_scalars(tbviews.scaling_charts(nvml=True))
    with EventWriter(tmp_path / "towers-2dev") as w:
        w.hparams_session(layout.trial_name("2026-01-01T00-00-00-scaling", "towers-2dev"),
                          {"devices": 2, "model": "mlp"}, ok=True)
    report = EventAccumulator(str(tmp_path / "report"), size_guidance={"tensors": 0})
    report.Reload()
    content = report.SummaryMetadata(hp_metadata.EXPERIMENT_TAG).plugin_data.content
    experiment = hp_metadata.parse_experiment_plugin_data(content)
    assert [(h.name, h.type, h.differs) for h in experiment.hparam_infos] == [
        ("devices", api_pb2.DATA_TYPE_FLOAT64, True), ("model", api_pb2.DATA_TYPE_STRING, False)]
    assert [m.name.tag for m in experiment.metric_infos] == ["by_config/examples_per_s"]
    (event,) = report.Tensors(cs_metadata.CONFIG_SUMMARY_TAG)
    parsed = layout_pb2.Layout.FromString(tensor_util.make_ndarray(event.tensor_proto).item())
    assert [c.title for c in parsed.category] == [tbviews.SCALING, tbviews.GPUS]
    charts = {c.title: list(c.multiline.tag) for c in parsed.category[0].chart}
    assert charts["loss, every configuration"] == ["^train/loss$"]
    session = EventAccumulator(str(tmp_path / "towers-2dev"), size_guidance={"tensors": 0})
    session.Reload()
    start = hp_metadata.parse_session_start_info_plugin_data(
        session.SummaryMetadata(hp_metadata.SESSION_START_INFO_TAG).plugin_data.content)
    assert start.group_name == "towers-2dev 2026-01-01T00-00-00-scaling"
    assert start.hparams["devices"].number_value == 2
    end = hp_metadata.parse_session_end_info_plugin_data(
        session.SummaryMetadata(hp_metadata.SESSION_END_INFO_TAG).plugin_data.content)
    assert end.status == api_pb2.STATUS_SUCCESS
