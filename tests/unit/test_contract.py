"""The format contract (gpudiag/layout.py) and the typed parent/child records
(gpudiag/records/training.py): round trips through JSON and through real event files."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
import typer
from helpers import read_scalars

from gpudiag import layout
from gpudiag.cli import app
from gpudiag.records.devices import DeviceSetup
from gpudiag.records.training import (
    AllreduceConfig,
    AllreduceResult,
    AllreduceRow,
    DataInfo,
    TrainingConfig,
    TrainingResult,
    TrainResult,
    Workload,
    finite,
)
from gpudiag.scaling.options import ScalingOptions

SETUP = DeviceSetup(kind="virtual-cpu", host_device="/device:CPU:0",
                    compute_devices=["/device:CPU:1", "/device:CPU:2"],
                    logical_devices=["/device:CPU:0", "/device:CPU:1", "/device:CPU:2"],
                    note="two stand-ins")


def through_json(record):
    """``record.to_dict()`` as the other process reads it: strict JSON text, parsed."""
    return json.loads(json.dumps(record.to_dict(), allow_nan=False))


def train_result(**changes) -> TrainResult:
    values = {
        "strategy": "towers", "devices": SETUP.compute_devices, "global_batch": 64,
        "steps": 3, "step_s": [0.5, 0.02, 0.021], "timed_steps": [1, 2],
        "examples_per_s": 3100.0, "step_s_median": 0.0205, "losses": [2.3, 2.1, None],
        "accuracies": [0.1, 0.2, 0.25], "tower_losses_last": [1.9, 2.0], "final_loss": 2.2,
        "final_accuracy": 0.18, "eval_loss": 2.25, "eval_accuracy": 0.2,
        "eval_loss_ema": None, "eval_accuracy_ema": None,
        "ops_by_device": {"/device:CPU:1": 40, "/device:CPU:2": 40},
        "op_devices": {"tower_0/MatMul": "/device:CPU:1"}, "profile_dir": "/tmp/run",
        "profiled_steps": [0], "checkpoint_path": "/tmp/run/checkpoints/ckpt-3", "wall_s": 1.5,
    }
    return TrainResult(**{**values, **changes})


def test_training_config_round_trips_and_defaults_live_in_workload() -> None:
    config = TrainingConfig(strategy="mirrored", n_devices=2, logdir="/runs/x/mirrored-2dev",
                            workload=Workload(steps=30, ema_decay=0.0, data="/d/train.npz"),
                            virtual_gpus=2, progress=True)
    assert TrainingConfig.from_dict(through_json(config)) == config
    assert through_json(config)["workload"]["steps"] == 30
    # the child reads a config without a workload with the one set of defaults
    bare = TrainingConfig.from_dict({"strategy": "towers", "n_devices": 1, "logdir": "x"})
    assert bare.workload == Workload() == ScalingOptions().workload
    assert ScalingOptions().training_config("towers", 4, Path("r")).workload == Workload()


def test_records_refuse_unknown_keys_and_strategies() -> None:
    with pytest.raises(ValueError, match=r"unknown field\(s\) stepz"):
        Workload.from_dict({"stepz": 3})
    with pytest.raises(ValueError, match="unknown strategy 'horovod'"):
        TrainingConfig(strategy="horovod", n_devices=1, logdir="x")
    with pytest.raises(ValueError, match=r"TrainingResult: missing field\(s\) data, model"):
        TrainingResult.from_dict({"setup": SETUP.to_dict()})


def test_training_result_round_trips_with_nested_records() -> None:
    result = TrainingResult(
        setup=SETUP, data=DataInfo("synthetic", "synthetic", 8192, 1024, (28, 28, 1), 10),
        model="mlp", param_count=101_770, gradient_bytes=407_080, variables_on="cpu",
        batch_per_device=32, train=train_result())
    plain = through_json(result)
    assert plain["setup"]["summary"].startswith("2 virtual-cpu device(s)")
    assert plain["data"]["input_shape"] == [28, 28, 1]
    back = TrainingResult.from_dict(plain)
    assert back == result
    assert back.data.input_shape == (28, 28, 1) and back.train.losses[2] is None


def test_non_finite_numbers_become_none() -> None:
    assert [finite(v) for v in (1.5, math.nan, math.inf, -math.inf, None, 2)] == \
        [1.5, None, None, None, None, 2.0]
    with pytest.raises(ValueError):  # NaN would not be strict JSON; records hold None
        json.dumps(train_result(final_loss=math.nan).to_dict(), allow_nan=False)


def test_allreduce_records_round_trip() -> None:
    config = AllreduceConfig(sizes_bytes=[1 << 20, 2 << 20], n_devices=2, max_iters=4)
    assert AllreduceConfig.from_dict(through_json(config)) == config
    rows = [AllreduceRow(1 << 20, 4, 0.001, 1.0e9, 1.0e9),
            AllreduceRow(2 << 20, 3, 0.0015, 1.4e9, 1.4e9)]
    result = AllreduceResult(setup=SETUP, n_devices=2, cross_device_ops="ReductionToOneDevice",
                             rows=rows)
    assert AllreduceResult.from_dict(through_json(result)) == result
    assert result.peak_busbw_bytes_per_s == 1.4e9
    assert AllreduceResult(SETUP, 1, "x", []).peak_busbw_bytes_per_s is None


def test_cli_option_defaults_are_the_records_defaults() -> None:
    command = typer.main.get_command(app).commands["scaling"]  # type: ignore[attr-defined]
    defaults = {p.name: p.default for p in command.params}
    w, s = Workload(), ScalingOptions()
    for name in ("model", "batch_per_device", "steps", "warmup_steps", "profile_steps",
                 "learning_rate", "ema_decay", "histogram_every", "variables_on"):
        assert defaults[name] == getattr(w, name), name
    assert defaults["steps"] == 100
    assert defaults["strategy"] == ",".join(s.strategies)
    assert (defaults["timeout"], defaults["allreduce_min_mb"], defaults["allreduce_max_mb"],
            defaults["virtual_gpu_memory_mb"]) == \
        (s.timeout_s, s.allreduce_min_mb, s.allreduce_max_mb, s.memory_limit_mb)


# ------------------------------------------------------------------ progress lines


def test_step_line_round_trips_through_its_parser() -> None:
    line = layout.step_line(7, 100, 1.234567)
    assert line == "GPUDIAG-STEP 7 100 1.2346"
    assert layout.parse_step_line(line) == layout.StepProgress(7, 100, 1.2346)
    nan = layout.parse_step_line(layout.step_line(3, 10, math.nan))
    assert nan is not None and math.isnan(nan.loss)
    for other in ("", "GPUDIAG-STEP 1 2", "GPUDIAG-STEP a 2 0.1", "GPUDIAG-STEP 1 2 x",
                  "step 1 2 0.5", "GPUDIAG-STEP 1 2 0.5 extra"):
        assert layout.parse_step_line(other) is None, other
    out = "\n".join(["TF log noise", layout.step_line(1, 3, 2.3), layout.step_line(2, 3, 2.1),
                     "more noise"])
    assert layout.last_step(out) == layout.StepProgress(2, 3, 2.1)
    assert layout.last_step("no progress yet\n") is None


def test_chart_regexes_match_the_tags_they_are_for() -> None:
    import re

    from gpudiag.tb import views as tbviews

    def matches(groups, tag: str) -> list[str]:
        return [c.title for g in groups for c in g.charts
                if any(re.match(rx, tag) for rx in c.tag_regexes)]

    scaling = tbviews.scaling_charts(nvml=True)
    assert matches(scaling, layout.TAG_TRAIN_LOSS) == ["loss, every configuration"]
    assert matches(scaling, layout.tower_loss_tag(3)) == matches(scaling,
                                                                 layout.replica_loss_tag(12))
    assert matches(scaling, "towers/loss_x") == []
    assert matches(scaling, layout.gpu_util_tag(7)) == ["utilization % per GPU (NVML)"]
    gpm = "GPM SM utilization and occupancy % per GPU (Hopper and later)"
    assert matches(scaling, layout.gpu_sm_util_tag(7)) == [gpm]
    assert matches(scaling, layout.gpu_sm_occupancy_tag(0)) == [gpm]
    assert matches(scaling, layout.TAG_TRAIN_LOSS + "_ema") == []
    assert len(matches(tbviews.memory_charts(), layout.TAG_MEMORY_NVML_PROCESS)) == 1


def test_newest_run_dir_follows_the_run_directory_names(tmp_path) -> None:
    assert layout.newest_run_dir(tmp_path / "missing") is None
    assert layout.newest_run_dir(tmp_path) is None
    names = ["2026-01-02T00-00-00-env", "2026-01-02T00-00-00-env-2",
             "2026-01-02T00-00-00-env-10", "2026-01-01T23-59-59-scaling"]
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / layout.REPORT_JSON).write_text("{}")
    (tmp_path / "2027-01-01T00-00-00-env").mkdir()  # no report.json: not a run directory
    (tmp_path / "zz-notes").mkdir()
    assert layout.newest_run_dir(tmp_path) == tmp_path / "2026-01-02T00-00-00-env-10"


def test_scaling_figures_and_trials_of_ok_and_failed_configurations(tmp_path) -> None:
    """The parent's per-configuration writing from the report's data: an ok configuration
    gets its figures (NVML's included) as a level line and a successful trial; a failed one
    a failed trial with its hyperparameters from the options and no figures."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import api_pb2
    from tensorboard.plugins.hparams import metadata as hp_metadata

    from gpudiag.procs.runner import ChildResult
    from gpudiag.scaling import tb_runs
    from gpudiag.scaling.judge import ConfigRun

    def child(name: str, ok: bool) -> ChildResult:
        return ChildResult(name, "training", ok, None, None if ok else "boom",
                           None if ok else "RuntimeError", 0 if ok else 1, False, 1.0,
                           tmp_path / name)

    result = TrainingResult(
        setup=SETUP, data=DataInfo("synthetic", "synthetic", 8192, 1024, (28, 28, 1), 10),
        model="mlp", param_count=1, gradient_bytes=4, variables_on="cpu",
        batch_per_device=32, train=train_result(steps=3))
    run_dir = tmp_path / "2026-01-01T00-00-00-scaling"
    runs = [ConfigRun("towers-2dev", "towers", 2, child("towers-2dev", True), None, result),
            ConfigRun("mirrored-2dev", "mirrored", 2, child("mirrored-2dev", False), None,
                      None)]
    rows = [{"name": "towers-2dev", "strategy": "towers", "n_devices": 2,
             "examples_per_s": 3100.0, "speedup": 1.5, "efficiency": 0.75,
             "trace_busy_fraction": {"/device:CPU:1": 0.5, "/device:CPU:2": 0.25}}]
    configs = {"towers-2dev": {"devices": SETUP.compute_devices, "steps": 3,
                               "final_loss": 2.2, "final_accuracy": 0.18,
                               "nvml": {"summaries": [{"index": 0, "util_mean_percent": 87.5},
                                                      {"index": 1, "util_mean_percent": None}]}}}
    tb_runs.write_scaling_tb(run_dir, rows, configs, runs, "virtual-cpu", Workload())
    figures = read_scalars(run_dir / "towers-2dev")
    assert {tag: [(e.step, e.value) for e in events] for tag, events in figures.items()} == {
        tag: [(1, value), (3, value)] for tag, value in {
            layout.TAG_BY_CONFIG_EXAMPLES_PER_S: 3100.0, layout.TAG_BY_CONFIG_SPEEDUP: 1.5,
            layout.TAG_BY_CONFIG_EFFICIENCY: 0.75, layout.TAG_BY_CONFIG_FINAL_LOSS:
            pytest.approx(2.2), layout.TAG_BY_CONFIG_FINAL_ACCURACY: pytest.approx(0.18),
            layout.busy_share_tag(0): 0.5, layout.busy_share_tag(1): 0.25,
            layout.nvml_util_mean_tag(0): 87.5}.items()}
    assert read_scalars(run_dir / "mirrored-2dev") == {}

    def session(run: str) -> tuple[Any, Any]:
        acc = EventAccumulator(str(run_dir / run), size_guidance={"tensors": 0})
        acc.Reload()
        start = hp_metadata.parse_session_start_info_plugin_data(
            acc.SummaryMetadata(hp_metadata.SESSION_START_INFO_TAG).plugin_data.content)
        end = hp_metadata.parse_session_end_info_plugin_data(
            acc.SummaryMetadata(hp_metadata.SESSION_END_INFO_TAG).plugin_data.content)
        return start, end

    start, end = session("towers-2dev")
    assert start.group_name == layout.trial_name(run_dir.name, "towers-2dev")
    assert end.status == api_pb2.STATUS_SUCCESS
    start, end = session("mirrored-2dev")
    assert end.status == api_pb2.STATUS_FAILURE
    assert {k: (v.number_value or v.string_value) for k, v in start.hparams.items()} == {
        "devices": 2, "strategy": "mirrored", "batch_per_device": 32, "global_batch": 64,
        "variables_on": "mirrored", "model": "cnn-small", "data": "synthetic"}
    acc = EventAccumulator(str(run_dir / layout.REPORT_TB_RUN), size_guidance={"tensors": 0})
    acc.Reload()
    experiment = hp_metadata.parse_experiment_plugin_data(
        acc.SummaryMetadata(hp_metadata.EXPERIMENT_TAG).plugin_data.content)
    assert [m.name.tag for m in experiment.metric_infos] == [
        layout.TAG_BY_CONFIG_EXAMPLES_PER_S, layout.TAG_BY_CONFIG_STEP_TIME,
        layout.TAG_BY_CONFIG_SPEEDUP,
        layout.TAG_BY_CONFIG_EFFICIENCY, layout.TAG_BY_CONFIG_FINAL_LOSS,
        layout.TAG_BY_CONFIG_FINAL_ACCURACY, layout.busy_share_tag(0),
        layout.busy_share_tag(1), layout.nvml_util_mean_tag(0), layout.nvml_util_mean_tag(1)]
    # every column a logdir's trials have (scaling's and `run`'s: one experiment per
    # logdir); scaling's differ as its trials do
    infos = {h.name: h.differs for h in experiment.hparam_infos}
    assert list(infos) == list(layout.ALL_HPARAMS)
    assert {k: infos[k] for k in ("devices", "strategy", "batch_per_device", "global_batch",
                                  "variables_on", "model", "data")} == {
        "devices": False, "strategy": True, "batch_per_device": False, "global_batch": False,
        "variables_on": True, "model": True, "data": False}
