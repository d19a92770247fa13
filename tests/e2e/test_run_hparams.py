"""`gpudiag run` in TensorBoard's HParams dashboard: a user's Keras fit under
MirroredStrategy (tests/programs/mirrored_fit.py: SGD(0.002), batch 4 over two devices, 30
steps) is one trial, its hyperparameters as the hooks observed them and its metrics the
report's numbers. Read back by TensorBoard itself (its HParams plugin over HTTP, as the
dashboard asks), in a logdir that also holds the sample scaling run (TensorBoard takes
one experiment of a logdir: scaling's, which lists the program's columns too) and in the
run's logdir alone (no experiment: TensorBoard builds one from the trial)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from golden import GoldenRuns
from helpers import REPO, load_report, run_dirs, until

from gpudiag import layout
from gpudiag.tb import serve as tbserve

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory, mirrored_fit: GoldenRuns) -> Path:
    root = tmp_path_factory.mktemp("hp") / "runs"
    (run_dir,) = mirrored_fit.run_dirs  # tests/golden.py's `gpudiag run` of mirrored_fit.py
    shutil.copytree(run_dir, root / "fit" / run_dir.name)
    shutil.copytree(REPO / "sample_runs" / "scaling", root / "scaling")
    return root


@pytest.fixture(scope="module")
def server(logdir: Path) -> Iterator[tbserve.Server]:
    srv = tbserve.start(logdir, 0, "localhost")
    try:
        yield srv
    finally:
        srv.stop()


def _post(srv: tbserve.Server, path: str, body: dict[str, Any]) -> Any:
    return tbserve.get_json(srv.url + path, body)


def _groups(srv: tbserve.Server) -> dict[str, dict[str, Any]]:
    answer = _post(srv, "/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": ["STATUS_SUCCESS", "STATUS_FAILURE",
                                                  "STATUS_UNKNOWN", "STATUS_RUNNING"],
        "colParams": [], "startIndex": 0, "sliceSize": 100})
    return {g["name"]: g for g in answer.get("sessionGroups", [])}


def test_the_programs_trial_holds_its_hyperparameters_and_the_reports_numbers(
        logdir: Path, server: tbserve.Server) -> None:
    run_dir = run_dirs(logdir / "fit")[0]
    report = load_report(run_dir)
    process = report["data"]["run"]["tensorflow_processes"][0]
    trial = layout.trial_name(run_dir.name, layout.run_tb_name(process["pid"]))
    # TensorBoard loads the event files after it starts: until both runs' trials are listed
    groups: dict[str, dict[str, Any]] = until(
        lambda: (lambda g: g if trial in g and len(g) > 1 and g[trial].get("metricValues")
                 else None)(_groups(server)), "the trials listed", deadline_s=120)
    group = groups[trial]
    assert group["hparams"] == {
        "program": "mirrored_fit.py", "strategy": "MirroredStrategy", "devices": 2,
        "global_batch": 4, "batch_per_device": 2, "optimizer": "SGD",
        "learning_rate": pytest.approx(0.002), "steps": 30, "model": "Sequential"}
    assert group["sessions"][0]["status"] == "STATUS_SUCCESS"
    timing = next(f for f in report["findings"] if f["id"] == "run.throughput")
    loop = timing["evidence"]["loops"][0]
    steps = [s for s in process["record"]["series"][0]["steps"] if s["loss"] is not None]
    final_loss = sum(s["loss"] for s in steps[-10:]) / len(steps[-10:])
    got = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
    assert got == {
        layout.TAG_BY_CONFIG_STEP_TIME: pytest.approx(loop["step_s_median"], rel=1e-6),
        layout.TAG_BY_CONFIG_EXAMPLES_PER_S: pytest.approx(loop["examples_per_s"], rel=1e-6),
        layout.TAG_BY_CONFIG_FINAL_LOSS: pytest.approx(final_loss, rel=1e-6)}
    # the experiment (scaling's: `run` writes none) lists the program's columns and
    # scaling's, throughput first
    experiment = _post(server, "/data/plugin/hparams/experiment", {"experimentName": ""})
    names = {h["name"] for h in experiment["hparamInfos"]}
    assert set(layout.RUN_HPARAMS) | set(layout.HPARAMS) <= names
    metrics = [m["name"]["tag"] for m in experiment["metricInfos"]]
    assert metrics[:2] == [layout.TAG_BY_CONFIG_EXAMPLES_PER_S, layout.TAG_BY_CONFIG_STEP_TIME]
    scaling_trials = [n for n in groups if n.endswith("-scaling")]
    assert scaling_trials and all(groups[n]["hparams"]["strategy"] in ("towers", "mirrored")
                                  for n in scaling_trials)


def test_alone_the_experiment_is_built_from_the_programs_trial(logdir: Path) -> None:
    srv = tbserve.start(logdir / "fit", 0, "localhost")
    try:
        experiment = until(lambda: (lambda e: e if e.get("metricInfos") else None)(_post(
            srv, "/data/plugin/hparams/experiment", {"experimentName": ""})),
            "the experiment built", deadline_s=120)
    finally:
        srv.stop()
    names = {h["name"] for h in experiment["hparamInfos"]}
    assert names == set(layout.RUN_HPARAMS)  # mirrored_fit.py's: every one observed
    metrics = [m["name"]["tag"] for m in experiment["metricInfos"]]
    assert metrics[0] == layout.TAG_BY_CONFIG_EXAMPLES_PER_S, metrics
    assert {layout.TAG_BY_CONFIG_STEP_TIME, layout.TAG_BY_CONFIG_FINAL_LOSS,
            layout.TAG_RUN_LOSS, layout.TAG_RUN_STEP_TIME} <= set(metrics)
