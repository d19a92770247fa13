"""TensorBoard on sample_runs/, the way a person opens it: every dashboard lists what the
run directories promise (over HTTP), the HParams dashboard shows exactly the report's
figures, and a real headless browser renders the answers (Time Series, Text, HParams,
Custom Scalars, Images). One TensorBoard server for the module.

The browser is Debian's chromium driven by playwright (its Python package carries the
driver; no browser download); where either is missing the browser test skips and says
why (`make test` installs chromium where apt-get can). Chromium gets no network but
localhost: the flags below turn its own background traffic off, and every request to
another host is aborted. With GPUDIAG_SCREENSHOTS=<dir> the screenshots go there
(`make screenshots` -> docs/images, the user guide's pictures).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, gpudiag, local_chromium, screenshot

from gpudiag import layout
from gpudiag.tb import check as tbcheck
from gpudiag.tb import serve as tbserve
from gpudiag.tb import views as tbviews

pytestmark = pytest.mark.slow
SAMPLE = REPO / "sample_runs"


def reports() -> dict[str, tuple[Path, dict[str, Any]]]:
    """command -> (run directory, report.json) of the sample runs."""
    out = {}
    for path in sorted(SAMPLE.glob("*/*/report.json")):
        report = json.loads(path.read_text())
        out[report["command"]] = (path.parent, report)
    return out


def prefix(run_dir: Path) -> str:
    return run_dir.relative_to(SAMPLE).as_posix()


@pytest.fixture(scope="module")
def server() -> Iterator[tbserve.Server]:
    srv = tbserve.start(SAMPLE, 0, "localhost")
    try:
        yield srv
    finally:
        srv.stop()


def get(srv: tbserve.Server, path: str, body: dict[str, Any] | None = None) -> Any:
    return tbserve.get_json(srv.url + path, body)


def session_groups(srv: tbserve.Server) -> list[dict[str, Any]]:
    answer = get(srv, "/data/plugin/hparams/session_groups", {
        "experimentName": "", "allowedStatuses": ["STATUS_SUCCESS", "STATUS_FAILURE",
                                                  "STATUS_UNKNOWN", "STATUS_RUNNING"],
        "colParams": [], "startIndex": 0, "sliceSize": 100})
    groups: list[dict[str, Any]] = answer["sessionGroups"]
    return groups


def test_check_passes_on_the_sample_runs() -> None:
    proc = gpudiag("tensorboard", "--check", "--port", "0", str(SAMPLE), timeout=400)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()[1:]
    assert [ln.split()[1].rstrip(":") for ln in lines] == list(tbcheck.PLUGINS)
    assert all(ln.startswith("  OK   ") and "nothing expected" not in ln for ln in lines), lines
    assert proc.stderr == ""


def test_dashboards_list_the_expected_runs_and_tags(server: tbserve.Server) -> None:
    runs = reports()
    scaling_dir, scaling = runs["scaling"]
    configs = scaling["data"]["scaling"]["configs"]
    assert sorted(configs) == sorted(f"{s}-{n}dev" for s in ("towers", "mirrored")
                                     for n in (1, 2, 4))
    scalars = get(server, "/data/plugin/scalars/tags")
    histograms = get(server, "/data/plugin/histograms/tags")
    for name, config in configs.items():
        run = f"{prefix(scaling_dir)}/{name}"
        slice_tag = (layout.tower_loss_tag if config["strategy"] == "towers"
                     else layout.replica_loss_tag)(config["n_devices"] - 1)
        assert {layout.TAG_TRAIN_LOSS, layout.TAG_TRAIN_EXAMPLES_PER_S, slice_tag,
                layout.TAG_NORM_GRADIENTS, layout.TAG_NORM_EMA,
                layout.TAG_BY_CONFIG_EXAMPLES_PER_S} <= set(scalars[run]), run
        other = "replicas/" if config["strategy"] == "towers" else "towers/"
        assert not [t for t in scalars[run] if t.startswith(other)], run
        assert set(histograms[run]) == {"gradients/conv1/kernel", "variables/conv1/kernel",
                                        "gradients/logits/kernel", "variables/logits/kernel"}
    # no scalar anywhere whose step is a device count or a message size
    assert not [t for tags in scalars.values() for t in tags if t.startswith("allreduce/")]
    memory_dir, _ = runs["memory"]
    assert layout.TAG_MEMORY_TF_CURRENT in scalars[f"{prefix(memory_dir)}/memory-cpu"]
    # text: every command's findings and report; the scaling table once
    text = get(server, "/data/plugin/text/tags")
    for run_dir, _ in runs.values():
        assert {layout.TAG_FINDINGS, layout.TAG_REPORT} <= set(
            text[f"{prefix(run_dir)}/{layout.REPORT_TB_RUN}"])
    assert [run for run, tags in text.items() if layout.TAG_SCALING_TABLE in tags] == \
        [f"{prefix(scaling_dir)}/{layout.REPORT_TB_RUN}"]
    images = get(server, "/data/plugin/images/tags")
    assert {layout.TAG_SCALING_PLOT, layout.TAG_ALLREDUCE_PLOT} <= set(
        images[f"{prefix(scaling_dir)}/{layout.REPORT_TB_RUN}"])
    # custom scalars: the scaling and memory categories (no NVML on this machine)
    categories = {c["title"]: c for c in get(server, "/data/plugin/custom_scalars/layout")
                  ["category"]}
    assert set(categories) == {tbviews.SCALING, tbviews.MEMORY}
    charts = [c["title"] for c in categories[tbviews.SCALING]["chart"]]
    assert charts[:2] == ["examples/s per step, every configuration",
                          "loss, every configuration"]
    # HParams: one trial per configuration, named by its run, and one per process of the
    # `run` sample (the user's program); throughput first
    experiment = get(server, "/data/plugin/hparams/experiment", {"experimentName": ""})
    assert [m["name"]["tag"] for m in experiment["metricInfos"]][:3] == [
        layout.TAG_BY_CONFIG_EXAMPLES_PER_S, layout.TAG_BY_CONFIG_STEP_TIME,
        layout.TAG_BY_CONFIG_SPEEDUP]
    run_dir, run = runs["run"]
    programs = [layout.trial_name(run_dir.name, layout.run_tb_name(p["pid"]))
                for p in run["data"]["run"]["tensorflow_processes"]]
    assert programs
    assert sorted(g["name"] for g in session_groups(server)) == sorted(
        [layout.trial_name(scaling_dir.name, name) for name in configs] + programs)


def test_hparams_metrics_are_the_reports_figures(server: tbserve.Server) -> None:
    """Every metric of every trial equals the report's number for that configuration
    (float32 precision: scalars are float32); none is missing, none extra."""
    scaling_dir, report = reports()["scaling"]
    data = report["data"]["scaling"]
    rows = {r["name"]: r for r in data["rows"]}
    groups = {g["name"]: g for g in session_groups(server)}
    for name, config in data["configs"].items():
        row = rows[name]
        want = {layout.TAG_BY_CONFIG_EXAMPLES_PER_S: row["examples_per_s"],
                layout.TAG_BY_CONFIG_SPEEDUP: row["speedup"],
                layout.TAG_BY_CONFIG_EFFICIENCY: row["efficiency"],
                layout.TAG_BY_CONFIG_FINAL_LOSS: config["final_loss"],
                layout.TAG_BY_CONFIG_FINAL_ACCURACY: config["final_accuracy"]}
        busy = row["trace_busy_fraction"]
        want.update({layout.busy_share_tag(i): busy[d] for i, d in enumerate(config["devices"])})
        group = groups[layout.trial_name(scaling_dir.name, name)]
        got = {m["name"]["tag"]: m["value"] for m in group["metricValues"]}
        assert set(got) == set(want), name
        for tag, value in want.items():
            assert got[tag] == pytest.approx(value, rel=1e-6), (name, tag)
        hparams = group["hparams"]
        assert (hparams["devices"], hparams["strategy"], hparams["global_batch"]) == \
            (config["n_devices"], config["strategy"], config["global_batch"])
    # the conclusions the report draws read the same from the trials
    eps = {n: groups[layout.trial_name(scaling_dir.name, n)]["metricValues"] for n in rows}
    best = max(rows, key=lambda n: rows[n]["examples_per_s"])
    assert max(eps, key=lambda n: next(m["value"] for m in eps[n] if m["name"]["tag"]
                                       == layout.TAG_BY_CONFIG_EXAMPLES_PER_S)) == best


# ------------------------------------------------------------------ the real browser


@pytest.fixture(scope="module")
def page(server: tbserve.Server) -> Iterator[Any]:
    with local_chromium(server.url) as context:
        yield context.new_page()


def shoot(page: Any, name: str, tmp_path: Path) -> None:
    screenshot(page, f"tensorboard-{name}", tmp_path)


def open_dashboard(page: Any, server: tbserve.Server, plugin: str) -> None:
    page.goto(f"{server.url}/?darkMode=false#{plugin}")


def test_browser_renders_the_answers(page: Any, server: tbserve.Server, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    runs = reports()
    scaling_dir, scaling = runs["scaling"]
    timeout = 90_000
    # Time Series: each configuration's figures come first, every configuration listed
    open_dashboard(page, server, "timeseries")
    expect(page.get_by_text(layout.BY_CONFIG, exact=True).first).to_be_visible(timeout=timeout)
    expect(page.get_by_text(layout.TAG_BY_CONFIG_EXAMPLES_PER_S).first).to_be_visible()
    for name in ("towers-4dev", "mirrored-4dev"):
        expect(page.get_by_text(f"{prefix(scaling_dir)}/{name}").first).to_be_attached()
    page.wait_for_timeout(3000)  # the charts draw after their cards appear
    shoot(page, "timeseries", tmp_path)
    # Text: the short verdict is the first card, then the findings summary with the scaling
    # findings in it
    open_dashboard(page, server, "text")
    expect(page.get_by_text(layout.TAG_VERDICT).first).to_be_visible(timeout=timeout)
    expect(page.get_by_text(layout.TAG_FINDINGS).first).to_be_visible(timeout=timeout)
    verdict_box = page.get_by_text(layout.TAG_VERDICT).first.bounding_box()
    summary_box = page.get_by_text(layout.TAG_FINDINGS).first.bounding_box()
    assert verdict_box and summary_box and verdict_box["y"] < summary_box["y"]
    first_finding = next(f for f in scaling["findings"] if f["status"] == "warn")
    expect(page.get_by_text(first_finding["id"]).first).to_be_visible(timeout=timeout)
    expect(page.get_by_text(f"gpudiag {scaling['command']}").first).to_be_attached()
    env_summary = page.locator(f"text={prefix(runs['env'][0])} >> visible=true")
    assert env_summary.count() > 0
    page.get_by_label("Write a regex to filter runs").fill(prefix(scaling_dir))
    expect(env_summary).to_have_count(0, timeout=timeout)  # only the scaling run's cards
    page.wait_for_timeout(1000)
    shoot(page, "text", tmp_path)
    # HParams: a row per configuration, named by its run, throughput first
    open_dashboard(page, server, "hparams")
    for name in scaling["data"]["scaling"]["configs"]:
        expect(page.get_by_text(layout.trial_name(scaling_dir.name, name)).first) \
            .to_be_attached(timeout=timeout)
    run_dir, run = runs["run"]
    for process in run["data"]["run"]["tensorflow_processes"]:  # the user's program
        expect(page.get_by_text(layout.trial_name(
            run_dir.name, layout.run_tb_name(process["pid"]))).first).to_be_attached()
    expect(page.get_by_text("examples/s (median)").first).to_be_visible()
    shoot(page, "hparams", tmp_path)
    # Custom Scalars: one chart per question
    open_dashboard(page, server, "custom_scalars")
    for title in (tbviews.SCALING, tbviews.MEMORY, "examples/s per step, every configuration",
                  "loss, every configuration"):
        expect(page.get_by_text(title).first).to_be_visible(timeout=timeout)
    shoot(page, "custom-scalars", tmp_path)
    # Images: the scaling plot
    open_dashboard(page, server, "images")
    expect(page.get_by_text(layout.TAG_SCALING_PLOT).first).to_be_visible(timeout=timeout)
    page.get_by_role("checkbox", name="Show actual image size").click()
    page.wait_for_timeout(1500)  # the images load after their cards
    shoot(page, "images", tmp_path)
