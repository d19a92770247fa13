"""The GPUDIAG tab in a real browser: plain TensorBoard (``python -m tensorboard.main``, as
`tensorboard --logdir` runs it) lists the plugin where gpudiag is installed, and chromium
(playwright, Debian's /usr/bin/chromium, as tests/browser/test_tensorboard_views.py) shows, on the
sample runs and on fresh `gpudiag run`s of a Keras fit, each device's lane, the bottleneck
with the user's file:line, the learning verdict; a running run as running with its step
count growing without a reload; two runs side by side. Every request the browser makes is
recorded: none leaves localhost; no console error. With GPUDIAG_SCREENSHOTS=<dir> the
dashboard's screenshot goes there (`make screenshots` -> docs/images).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from golden import GoldenRuns
from helpers import (
    REPO,
    ended,
    gpudiag,
    load_report,
    local_chromium,
    run_dirs,
    screenshot,
    until,
    write_try_run,
)

from gpudiag import layout
from gpudiag.layout.units import duration
from gpudiag.rundir import list_runs, load_run, opens_on
from gpudiag.rundir.records import PART_NAMES
from gpudiag.tb import serve as tbserve
from gpudiag.tbplugin import views
from gpudiag.verdicts import headline

pytestmark = pytest.mark.slow
PROGRAMS = REPO / "tests" / "programs"
TIMEOUT_MS = 90_000


def _report(run_dir: Path) -> dict[str, Any]:
    """A run's report as the page reads it (gpudiag.rundir's typed report: a sample run
    written before findings had questions gets its families' ones)."""
    from gpudiag.rundir import load_run

    if run_dir.is_relative_to(REPO / "sample_runs") or "sample" in run_dir.parts:
        return load_run(run_dir).report.to_dict()
    return load_report(run_dir)


def _finding(report: dict[str, Any], finding_id: str) -> dict[str, Any]:
    return next(f for f in report["findings"] if f["id"] == finding_id)


@pytest.fixture(scope="module")
def logdir(tmp_path_factory: pytest.TempPathFactory, pipeline_pair: GoldenRuns,
           retrace: GoldenRuns) -> Path:
    """The sample runs, a `gpudiag try` run written from recorded trials, a `monitor` and a
    `run` with two scripted GPUs (one busy, one
    idle: tests/fake_nvml.py's one_idle), a retracing program, `gpudiag explain` of a
    copy-heavy GPU trace, then (newest last) an input-bound Keras fit, the same fit tuned,
    and a run of a script whose import has a typo (`import tensorflw`: it exits 1 before
    any TensorFlow work, a failed run)."""
    root = tmp_path_factory.mktemp("tb") / "runs"
    shutil.copytree(REPO / "sample_runs", root / "sample",
                    ignore=shutil.ignore_patterns("README.md"))
    write_try_run(root / "try")  # a `gpudiag try` run, from recorded trials (no program)
    # two scripted GPUs behind the real NVML interface: GPU 0 busy (90 %), GPU 1 idle
    for name, argv in (("nvml-monitor", ["monitor", "--logdir", str(root / "nvml-monitor"),
                                         "--", sys.executable, str(PROGRAMS / "eager_loop.py"),
                                         "200"]),
                       ("nvml-run", ["run", "--logdir", str(root / "nvml-run"), "--",
                                     sys.executable, str(PROGRAMS / "keras_fit_tiny.py")])):
        # the programs exit 0, and so does gpudiag (a failed check: idle GPU 1)
        proc = gpudiag(*argv, fake_nvml="one_idle", timeout=400)
        assert proc.returncode == 0, (name, proc.stdout[-2000:], proc.stderr[-2000:])
    # the tf.function guide's retracing example (run.retracing: why a step is slow) and a
    # real GPU trace with many host-device copies (its step's copy part)
    (retraced,) = retrace.run_dirs  # tests/golden.py's
    shutil.copytree(retraced, root / "retrace" / retraced.name)
    proc = gpudiag("explain", "--logdir", str(root / "copy"),
                   str(REPO / "tests" / "data" / "gpu_traces" / "rtx5000_copy_heavy"))
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    for name, run_dir in zip(("input", "tuned"), pipeline_pair.run_dirs, strict=True):
        shutil.copytree(run_dir, root / name / run_dir.name)  # tests/golden.py's pair
    script = root.parent / "typo_import.py"
    script.write_text("import tensorflw\n")
    typo = gpudiag("run", "--logdir", str(root / "typo"), "--", sys.executable, str(script))
    assert typo.returncode != 0
    return root


@pytest.fixture(scope="module")
def server(logdir: Path) -> Iterator[tbserve.Server]:
    srv = tbserve.start(logdir, 0, "localhost")
    try:
        yield srv
    finally:
        srv.stop()


class Browser:
    """One chromium page with every request and every console error recorded."""

    def __init__(self, context: Any, local: str) -> None:
        self.requests: list[str] = []
        self.errors: list[str] = []
        self.failed: list[str] = []  # each response of 400 or more: its URL and its answer
        self.local = local
        context.on("request", lambda req: self.requests.append(req.url))
        context.on("response", self._failed)
        self.page = context.new_page()
        self.page.on("console", lambda msg: self.errors.append(msg.text)
                     if msg.type == "error" else None)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))

    def _failed(self, response: Any) -> None:
        if response.status >= 400:
            try:
                said = response.text()[:300]
            except Exception as exc:  # the page moved on before its body was read
                said = f"(body not read: {type(exc).__name__})"
            self.failed.append(f"{response.status} {response.url}: {said}")

    def dashboard(self, server: tbserve.Server) -> Any:
        self.page.goto("about:blank")  # the same URL again would only change the hash
        self.page.goto(f"{server.url}/?darkMode=false#gpudiag")
        frame = self.page.frame_locator('iframe[src*="name=gpudiag"]')
        frame.locator("pre.headline").wait_for(timeout=TIMEOUT_MS)
        return frame

    def assert_clean(self) -> None:
        foreign = [u for u in self.requests if urlparse(u).scheme in ("http", "https", "ws")
                   and urlparse(u).hostname != self.local]
        assert not foreign, foreign
        assert self.requests, "no request recorded"
        assert not self.errors, (self.errors, self.failed)  # which request failed, and why


@pytest.fixture(scope="module")
def browser(server: tbserve.Server) -> Iterator[Browser]:
    with local_chromium(server.url) as context:
        yield Browser(context, urlparse(server.url).hostname or "localhost")


def test_plain_tensorboard_lists_the_gpudiag_tab(server: tbserve.Server) -> None:
    listing = tbserve.get_json(server.url + "/data/plugins_listing")
    entry = listing["gpudiag"]
    assert entry["enabled"] and entry["tab_name"] == "GPUDIAG"
    assert entry["loading_mechanism"] == {"type": "IFRAME",
                                          "module_path": "/data/plugin/gpudiag/index.js"}


def _choose(frame: Any, select: str, run_dir: Path, logdir: Path) -> None:
    frame.locator(f"#{select}").select_option(run_dir.relative_to(logdir).as_posix())


def test_first_screen_answers_devices_bottleneck_learning(
        browser: Browser, server: tbserve.Server, logdir: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    (input_dir,), (typo_dir,) = (run_dirs(logdir / n) for n in ("input", "typo"))
    frame = browser.dashboard(server)
    # the default is the newest completed run that answers a question (the golden pair was
    # made before this logdir's other runs; the typo's run is the newest, and failed)
    default = opens_on(list_runs(logdir))
    assert default is not None and default.status == "complete"
    assert typo_dir != default.path and load_run(typo_dir).status == "failed"
    expect(frame.locator("#gpudiag-run")).to_have_value(
        default.path.relative_to(logdir).as_posix())
    typo_option = frame.locator(
        f'#gpudiag-run option[value="{typo_dir.relative_to(logdir).as_posix()}"]')
    expect(typo_option).to_have_text(re.compile(r"\[failed before its work started\]"))
    # the input-bound fit: its lanes, the bottleneck at the user's line, the verdict
    _choose(frame, "gpudiag-run", input_dir, logdir)
    report = _report(input_dir)
    used = _finding(report, "run.every-device-used")["evidence"]
    for device in used["logical_devices"]:
        expect(frame.locator(f'tr.lane[data-device="{device}"]')).to_be_visible(
            timeout=TIMEOUT_MS)
    if not used.get("nvml_gpus"):  # no GPU here: one line saying so and why
        expect(frame.locator("p.nogpu")).to_contain_text("no GPU, ran on the CPU")
    found = _finding(report, "run.bottleneck")
    # the cause the report names (on a loaded 2-core machine the same fit is sometimes
    # overhead-bound rather than input-bound), its fix, and each line of the user's it names
    cause = found["evidence"]["causes"][0]
    expect(frame.locator("section.bottleneck .cause")).to_contain_text(cause)
    if found["actions"]:  # what to change, where, the step predicted after it: the
        # terminal's fix line, the same prediction on the same step (fix_said.action_said)
        (said, *_) = views.bottleneck(load_run(input_dir))["actions"]
        assert said["what"] == found["actions"][0]["what"] and "; predicted " in said["said"]
        expect(frame.locator("section.bottleneck .fix li.action").first).to_have_text(
            f"{said['where']}: {said['said']}")
        terminal = " ".join(" ".join(headline.verdict(report, headline.UNCUT)).split())
        assert f"fix at {said['where']}: {said['said']}" in terminal, (said, terminal)
        lines = list(dict.fromkeys(a["where"] for a in found["actions"] if a["where"]))
    else:  # a report written before actions: its advice, and the lines the advice names
        expect(frame.locator("section.bottleneck .fix")).to_contain_text(found["advice"][:60])
        lines = list(dict.fromkeys(re.findall(r"[\w./-]+\.py:\d+", found["advice"])))
    if cause == "input-bound":
        assert any(ln.startswith("input_pipeline_fit.py:") for ln in lines), found["advice"]
    expect(frame.locator("section.bottleneck .where code")).to_have_text(lines)
    # the verdict at the top is whole: at least one of its lines is longer than the
    # terminal's 80 columns (where it would be cut), and each is on the page as it is
    whole = headline.verdict(report, headline.UNCUT)
    assert any(len(ln) > headline.WIDTH for ln in whole), whole
    for line in whole:
        expect(frame.locator("pre.headline")).to_contain_text(line)
    bar = frame.locator("section.bottleneck .part.compute").first
    bar.hover()
    compute_ms = float(bar.get_attribute("data-ms"))
    parts = found["evidence"]["parts_s"]
    assert any(abs(p["compute_s"] * 1000 - compute_ms) < 1e-9 for p in parts.values()), parts
    # the tip says the part as the terminal writes a duration (gpudiag.layout.units)
    expect(frame.locator("#gpudiag-tip")).to_contain_text(
        f"compute {duration(compute_ms / 1000)} of ")
    learning = _finding(report, "run.learning")
    expect(frame.locator("section.learning .verdict")).to_have_text(
        learning["title"] or learning["message"])
    # all four questions above the fold of a 1600x1000 window
    for key in ("devices", "bottleneck", "learning"):
        box = frame.locator(f"section.{key}").bounding_box()
        assert box is not None and box["y"] < 1000, (key, box)
    browser.page.mouse.move(0, 0)  # the tooltip away from the picture
    expect(frame.locator("#gpudiag-tip")).to_be_hidden()
    screenshot(browser.page, "gpudiag-tab", tmp_path)
    # the sample scaling run: speed-up against the ideal; findings folded, worst first
    scaling_dir = next((logdir / "sample" / "scaling").iterdir())
    _choose(frame, "gpudiag-run", scaling_dir, logdir)
    expect(frame.locator("section.scaling svg.chart polyline")).to_have_count(2)
    expect(frame.locator("details.finding").first).to_be_visible()
    order = {"fail": 0, "warn": 1, "skip": 2, "ok": 3}
    for group in frame.locator("section.findings .group").all():
        statuses = [c.split()[1] for c in group.locator("details.finding").evaluate_all(
            "nodes => nodes.map(n => n.className)")]
        assert statuses == sorted(statuses, key=order.__getitem__), statuses
    # the first warning shown is one the report holds (scaling.efficiency, or a
    # configuration's bottleneck: its group comes first)
    warns = [f["id"] for f in _report(scaling_dir)["findings"] if f["status"] == "warn"]
    assert any(w.startswith("scaling.efficiency") for w in warns), warns
    warned = frame.locator("details.finding.warn").first
    expect(warned.locator("summary code")).to_have_text(
        re.compile("^(" + "|".join(map(re.escape, warns)) + ")$"))
    expect(frame.locator("details.finding.warn", has_text="scaling.efficiency")).to_have_count(
        sum(w.startswith("scaling.efficiency") for w in warns))
    expect(warned.locator("pre.evidence")).to_be_hidden()  # evidence folded away
    browser.assert_clean()


def test_a_try_run_shows_its_fixes_tried_and_no_empty_card(
        browser: Browser, server: tbserve.Server, logdir: Path) -> None:
    """A `gpudiag try` run: the card "fixes tried" with the answer's first line, each fix's
    verdict, B/A measured (the server's words, as the view gives them), its line as it
    would be and its prediction marked; no card the run has nothing for."""
    from playwright.sync_api import expect

    from gpudiag.tbplugin import views

    (try_dir,) = run_dirs(logdir / "try")
    tried = views.run_view(load_run(try_dir), logdir)["tried"]
    frame = browser.dashboard(server)
    _choose(frame, "gpudiag-run", try_dir, logdir)
    card = frame.locator("section.tried")
    expect(card.locator(".tried-headline")).to_have_text(
        _report(try_dir)["data"]["try"]["headline"], timeout=TIMEOUT_MS)
    parallel = card.locator('.tried-fix[data-fix="parallel-map"]')
    assert tried["fixes"][0]["measured"] == "B/A 0.52 (95 % CI 0.51-0.52, 3 rounds)"
    expect(parallel.locator(".measured")).to_have_text(tried["fixes"][0]["measured"])
    expect(parallel.locator(".badge")).to_have_text("faster")
    expect(parallel.locator("code.fixed")).to_have_text(tried["fixes"][0]["as_it_would_be"])
    expect(parallel.locator(".prediction")).to_have_text(
        "predicted B/A 0.15 (0.08-0.35): measured outside it")
    expect(card.locator('.tried-fix[data-fix="prefetch"] .badge')).to_have_text("no change")
    expect(card.locator(".not-tried li")).to_have_text(
        ["train.py:48: call .cache() after the map (predicted B/A 0.40 (0.20-0.70)) - "
         "not asked for (--fix)"])
    for empty in ("bottleneck", "devices", "learning", "scaling"):
        expect(frame.locator(f"section.{empty}")).to_have_count(0)
    # the first screen (the evidence folded below is JSON, where null is a value)
    expect(frame.locator("div.grid")).not_to_contain_text(re.compile(
        r"no profiled steps|\bnull\b|\bundefined\b|NaN"))
    _cards_fit(frame, "a try run")
    browser.assert_clean()


def _spark_levels(lane: Any) -> list[float]:
    """The utilization line's points as percent (the sparkline: 36 px high, 2 px margin)."""
    points = lane.locator("svg.spark polyline").get_attribute("points").split()
    return [round((34 - float(p.split(",")[1])) / 32 * 100, 1) for p in points]


def _util_samples(run_dir: Path, index: int) -> list[float]:
    """GPU ``index``'s utilization scalars, read by TensorBoard's own EventAccumulator."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    acc = EventAccumulator(str(run_dir / layout.NVML_TB_RUN), size_guidance={"tensors": 0})
    acc.Reload()
    return [float(tensor_util.make_ndarray(e.tensor_proto))
            for e in acc.Tensors(layout.gpu_util_tag(index))]


def test_each_gpus_lane_shows_used_or_idle_and_its_utilization_line(
        browser: Browser, server: tbserve.Server, logdir: Path, tmp_path: Path) -> None:
    """What a person looks at on a GPU machine: per GPU, used or idle, and its utilization
    over time, for `monitor` (any workload) and for `run` (TensorFlow listed no GPU here,
    while NVML answered: the lanes say so, and the reason is not 'no NVIDIA driver')."""
    from playwright.sync_api import expect

    (mon_dir,), (run_dir,) = run_dirs(logdir / "nvml-monitor"), run_dirs(logdir / "nvml-run")
    frame = browser.dashboard(server)
    for run, states in ((mon_dir, ("used", "idle")),
                        (run_dir, ("not visible to TensorFlow",) * 2)):
        _choose(frame, "gpudiag-run", run, logdir)
        for index, state, activity, level in ((0, states[0], "busy", 90.0),
                                              (1, states[1], "idle", 0.0)):
            lane = frame.locator(f'tr.lane[data-device="GPU {index} (NVML)"]')
            expect(lane.locator("td.name small")).to_have_text("Fake GPU 40GB")
            expect(lane.locator(".badge")).to_have_text(state, timeout=TIMEOUT_MS)
            expect(lane.locator(".activity")).to_have_text(activity)
            expect(lane).to_contain_text(f"mean {level:.0f}%")
            samples = _util_samples(run, index)
            assert len(samples) >= 2 and set(samples) == {level}, samples
            assert _spark_levels(lane) == [level] * len(samples)
        if run == run_dir:
            expect(frame.locator('tr.lane[data-device="/device:CPU:0"] .badge')).to_have_text(
                "used")
            nogpu = frame.locator("p.nogpu")
            expect(nogpu).to_contain_text("NVML sees 2 GPU(s); TensorFlow's CUDA did not start")
            expect(nogpu).not_to_contain_text("no NVIDIA driver")
        else:
            expect(frame.locator("p.nogpu")).to_have_count(0)
        # the first screen (the evidence folded below is JSON, where null is a value)
        expect(frame.locator("div.grid")).not_to_contain_text(re.compile(
            r"\bnull\b|\bundefined\b|NaN"))
    screenshot(browser.page, "gpudiag-lanes", tmp_path)
    browser.assert_clean()


def test_a_running_run_updates_without_a_reload(
        browser: Browser, server: tbserve.Server, logdir: Path, tmp_path: Path) -> None:
    from playwright.sync_api import expect

    gates = [tmp_path / "gate1", tmp_path / "gate2"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpudiag", "run", "--logdir", str(logdir / "live"), "--",
         sys.executable, str(PROGRAMS / "steps_gated.py"), *map(str, gates)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        stdin=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": str(REPO)}, cwd=REPO)
    with ended(proc):
        assert proc.stdout is not None
        next(line for line in proc.stdout if "waiting for gate1" in line)
        (run_dir,) = run_dirs(logdir / "live")
        until(lambda: list(run_dir.glob(f"{layout.RUN_TB_PREFIX}*/events.out.tfevents.*")),
              "the program's live TensorBoard file")
        frame = browser.dashboard(server)
        _choose(frame, "gpudiag-run", run_dir, logdir)
        expect(frame.locator(".live .badge.running")).to_be_visible(timeout=TIMEOUT_MS)
        steps = frame.locator(".live .steps").first
        expect(steps).to_have_text(re.compile(r"step 19$"), timeout=TIMEOUT_MS)
        gates[0].touch()
        next(line for line in proc.stdout if "waiting for gate2" in line)
        expect(steps).to_have_text(re.compile(r"step 39$"), timeout=TIMEOUT_MS)
        gates[1].touch()
        proc.communicate(timeout=120)
    assert proc.returncode == 0
    browser.assert_clean()


def _has_diff_command() -> bool:
    return gpudiag("diff", "--help").returncode == 0


def test_two_runs_side_by_side_show_the_diffs_numbers(
        browser: Browser, server: tbserve.Server, logdir: Path) -> None:
    from playwright.sync_api import expect

    from gpudiag.tbplugin import compare

    if not _has_diff_command():
        pytest.skip("`gpudiag diff` is not in this build: the side-by-side view has no data")
    (input_dir,), (tuned_dir,) = run_dirs(logdir / "input"), run_dirs(logdir / "tuned")
    proc = gpudiag("diff", str(input_dir), str(tuned_dir), "--logdir", str(logdir / "diffs"),
                   timeout=400)
    assert proc.returncode in (0, 1), proc.stderr
    (diff_dir,) = run_dirs(logdir / "diffs")
    from gpudiag.layout.diff import DiffRecord

    rows = compare.rows(DiffRecord.from_dict(_report(diff_dir)["data"]["diff"]))
    assert rows, "the diff record holds no compared figure"
    frame = browser.dashboard(server)
    _choose(frame, "gpudiag-run", input_dir, logdir)
    _choose(frame, "gpudiag-other", tuned_dir, logdir)
    table = frame.locator("section.diff table.diff")
    expect(table.locator("tbody tr")).to_have_count(len(rows), timeout=TIMEOUT_MS)
    expect(frame.locator("section.diff")).to_contain_text("(gpudiag diff)")
    for row in rows[:10]:
        expect(table).to_contain_text(row["a"])
        expect(table).to_contain_text(row["b"])
    # the answer in words, above the two runs' cards side by side in two columns
    result = frame.locator("section.diff p.result").first
    expect(result).to_have_text(re.compile(
        r"^B is \d+\.\d\dx (faster|slower) \(95 % CI \d+\.\d\d-\d+\.\d\d\): "
        r"\d+(\.\d+)? -> \d+(\.\d+)? ms a step$|^(no change|cannot tell): "))
    expect(frame.locator("section.diff")).not_to_contain_text(re.compile(r"x0\.\d"))
    for width in (1280, 1920):
        browser.page.set_viewport_size({"width": width, "height": 1000})
        sides = frame.locator(".sides > .side")
        expect(sides).to_have_count(2)
        a_box, b_box = (sides.nth(i).bounding_box() for i in (0, 1))
        top = frame.locator("section.diff").bounding_box()
        assert a_box and b_box and top
        assert abs(a_box["y"] - b_box["y"]) < 1 and b_box["x"] >= a_box["x"] + a_box["width"]
        assert top["y"] + top["height"] <= a_box["y"] + 1  # the result above both
        for side, run in ((0, input_dir), (1, tuned_dir)):
            column = sides.nth(side)
            expect(column.locator(".side-name")).to_contain_text(
                run.relative_to(logdir).as_posix())
            expect(column.locator("section.bottleneck")).to_be_visible()
            expect(column.locator("section.learning")).to_be_visible()
        _cards_fit(frame, f"side by side at {width} px")
    browser.page.set_viewport_size({"width": 1600, "height": 1000})
    said = result.inner_text()
    # chosen the other way round (the newer run first): still older (A) to newer (B)
    frame.locator("#gpudiag-other").select_option("")
    _choose(frame, "gpudiag-run", tuned_dir, logdir)
    _choose(frame, "gpudiag-other", input_dir, logdir)
    expect(frame.locator(".sides > .side").nth(0).locator(".side-name")).to_contain_text(
        f"A: {input_dir.relative_to(logdir).as_posix()}", timeout=TIMEOUT_MS)
    expect(frame.locator("section.diff p.result").first).to_have_text(said, timeout=TIMEOUT_MS)
    # the diff run itself, opened alone: its answer first, the same words, no empty card
    frame.locator("#gpudiag-other").select_option("")
    _choose(frame, "gpudiag-run", diff_dir, logdir)
    expect(frame.locator(".sides")).to_have_count(0, timeout=TIMEOUT_MS)
    expect(frame.locator("section.diff p.result").first).to_have_text(said, timeout=TIMEOUT_MS)
    expect(frame.locator("section.devices")).to_have_count(0)
    main = frame.locator("#gpudiag-main")
    expect(main).not_to_contain_text("no points recorded")
    expect(main).not_to_contain_text("no per-device evidence")
    browser.assert_clean()


#: Each card's content within the card: no descendant's right edge past the card's, and
#: nothing scrolled sideways (a picture of fixed width in a narrower card overflows).
_OVERFLOW = """cards => cards.flatMap(card => {
  const box = card.getBoundingClientRect();
  const out = card.scrollWidth > card.clientWidth + 1
    ? [`${card.className}: scrollWidth ${card.scrollWidth} > ${card.clientWidth}`] : [];
  for (const n of card.querySelectorAll("*")) {
    const r = n.getBoundingClientRect();
    if (r.width > 0 && r.right > box.right + 1)
      out.push(`${card.className}: ${n.tagName}.${n.getAttribute("class")} ends at ` +
               `${Math.round(r.right)} > ${Math.round(box.right)}`);
  }
  return out;
})"""


def _cards_fit(frame: Any, where: str) -> None:
    frame.locator("section.card").first.wait_for(timeout=TIMEOUT_MS)
    wide = frame.locator("section.card").evaluate_all(_OVERFLOW)
    assert not wide, (where, wide[:10])


def test_every_card_holds_its_content_from_1280_to_1920_px(
        browser: Browser, server: tbserve.Server, logdir: Path, tmp_path: Path) -> None:
    """The step bar (every part, the ms label, the legend), the device lanes and the
    charts inside their cards at 1280 and 1920 px; a retracing program's finding under
    'why slow'."""
    from playwright.sync_api import expect

    frame = browser.dashboard(server)
    runs = [run_dirs(logdir / n)[0] for n in ("input", "nvml-run", "copy", "retrace")]
    runs.append(next((logdir / "sample" / "scaling").iterdir()))
    for width in (1280, 1920):
        browser.page.set_viewport_size({"width": width, "height": 1000})
        for run in runs:
            _choose(frame, "gpudiag-run", run, logdir)
            expect(frame.locator(".side-name")).to_have_count(0)
            expect(frame.locator("section.devices")).to_be_visible(timeout=TIMEOUT_MS)
            expect(frame.locator("pre.headline")).to_contain_text(
                f"gpudiag {_report(run)['command']}")
            neck = frame.locator("section.bottleneck .breakdown")
            if neck.count():  # the legend names every part, whole
                parts = frame.locator("section.bottleneck .blegend .key").all_inner_texts()
                assert parts == list(PART_NAMES), parts
            _cards_fit(frame, f"{run.name} at {width} px")
        screenshot(browser.page, f"gpudiag-tab-{width}", tmp_path)
    # the retracing program: its finding under "why slow", not "Other checks"
    (retrace,) = run_dirs(logdir / "retrace")
    _choose(frame, "gpudiag-run", retrace, logdir)
    retracing = frame.locator('.group[data-question="why_slow"] '
                              'details.finding[data-id="run.retracing"]')
    expect(retracing).to_have_count(1, timeout=TIMEOUT_MS)
    expect(retracing.locator("summary")).to_contain_text("run.retracing")
    expect(frame.locator('.group[data-question="other"]')).to_have_count(0)
    browser.page.set_viewport_size({"width": 1600, "height": 1000})
    browser.assert_clean()


def test_the_copy_heavy_traces_step_bar_draws_its_copy_part(
        browser: Browser, server: tbserve.Server, logdir: Path) -> None:
    from playwright.sync_api import expect

    if "copy" not in PART_NAMES:
        pytest.xfail("gpudiag.rundir.records declares no copy part (issue 35, item 4): "
                     "the copy-heavy trace's bar has no copy to draw")
    frame = browser.dashboard(server)
    (run,) = run_dirs(logdir / "copy")
    _choose(frame, "gpudiag-run", run, logdir)
    copy = frame.locator("section.bottleneck .part.copy").first
    expect(copy).to_be_visible(timeout=TIMEOUT_MS)
    box = copy.bounding_box()
    assert box is not None and box["width"] > 1, box
    copy.hover()
    expect(frame.locator("#gpudiag-tip")).to_contain_text("copy ")
    browser.assert_clean()
