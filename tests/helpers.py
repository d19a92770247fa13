"""Shared test helpers, imported by every tier (``from helpers import ...``; tests/ is on
pytest's pythonpath): run the real CLI in a real child process, read run directories."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

TESTS_DIR = Path(__file__).parent
REPO = TESTS_DIR.parent


def gpudiag(*args: str, timeout: float = 300, env: dict[str, str] | None = None,
            cwd: Path | None = None, fake_nvml: str | None = None,
            ) -> subprocess.CompletedProcess[str]:
    """Run ``python -m gpudiag ARGS`` as a user would; text output captured. With
    ``fake_nvml`` (a scenario name of tests/fake_nvml.py) NVML is that scenario, given
    through gpudiag.cli.main's ``open_nvml`` (tests/gpudiag_with_fake_nvml.py)."""
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    entry = (["-m", "gpudiag"] if fake_nvml is None
             else [str(TESTS_DIR / "gpudiag_with_fake_nvml.py"), fake_nvml])
    return subprocess.run(
        [sys.executable, *entry, *args], capture_output=True, text=True,
        timeout=timeout, env=full_env, cwd=cwd or REPO, stdin=subprocess.DEVNULL,
    )


def assert_usage_error(proc: subprocess.CompletedProcess[str], needle: str,
                       logdir: Path | None = None) -> None:
    """Bad input: exit 2, exactly one line ``gpudiag: error: ...`` naming ``needle``, no
    traceback, and (given ``logdir``) nothing written there."""
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("gpudiag: error:") and needle in lines[0], lines[0]
    assert "Traceback" not in proc.stderr
    if logdir is not None:
        assert not logdir.exists()


def run_dirs(logdir: Path) -> list[Path]:
    """The run directories under ``logdir`` (not the cluster directories `gpudiag run`
    writes beside them for a multi-worker program)."""
    from gpudiag.layout import RUN_CLUSTER_DIR_PREFIX

    if not logdir.exists():
        return []
    return sorted(p for p in logdir.iterdir()
                  if p.is_dir() and not p.name.startswith(RUN_CLUSTER_DIR_PREFIX))


def load_report(run_dir: Path) -> dict[str, Any]:
    """report.json as plain data, read by the one reader of a run directory. Every finding
    a command wrote belongs to a declared family (gpudiag.layout.families: its question
    is set), and, in a report of this schema, has its title (assert_title)."""
    from gpudiag.layout import SCHEMA_VERSION
    from gpudiag.rundir import load_run

    run = load_run(run_dir)
    data = run.report_json
    for f in run.report.findings:  # typed: a version 1 report's questions from the registry
        assert f.question, f"{f.id}: no family in gpudiag.layout.families"
        if data["schema_version"] >= SCHEMA_VERSION:  # written by this gpudiag: titled
            assert_title(f.id, f.title)
    return data


def assert_title(finding_id: str, title: str) -> None:
    """A finding's title as every verdict writes it: the answer, one line of at most
    TITLE_MAX characters, never cut ("..." or "…")."""
    from gpudiag.layout.families import TITLE_MAX

    assert title.strip(), f"finding {finding_id} has no title"
    assert len(title) <= TITLE_MAX and "\n" not in title, f"{finding_id}: {title!r}"
    assert "..." not in title and "\u2026" not in title, f"{finding_id}: cut title {title!r}"


def findings_by_id(report: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["id"]: f for f in report["findings"]}


@dataclass(frozen=True)
class ScalarEvent:
    step: int
    value: float
    wall_time: float


def files_holding(tb_run: Path, tag: str) -> list[Path]:
    """The event files of a TensorBoard run that hold ``tag`` (a `run`'s program run holds
    its steps, written live, and beside them its HParams trial, written at the end)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from gpudiag.rundir.loops import tensorboard_without_tensorflow

    tensorboard_without_tensorflow()  # reading scalars needs no TensorFlow
    found = []
    for path in sorted(tb_run.glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(path), size_guidance={"tensors": 0})
        acc.Reload()
        if tag in acc.Tags()["tensors"]:
            found.append(path)
    return found


def read_scalars(tb_run: Path) -> dict[str, list[ScalarEvent]]:
    """Every scalar of a TensorBoard run, by tag: the scalar plugin's tensors (how gpudiag
    writes every scalar, parent and child alike; gpudiag/layout.py)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    from gpudiag.rundir.loops import tensorboard_without_tensorflow

    tensorboard_without_tensorflow()  # reading scalars needs no TensorFlow
    acc = EventAccumulator(str(tb_run), size_guidance={"tensors": 0})
    acc.Reload()
    out: dict[str, list[ScalarEvent]] = {}
    for tag in acc.Tags()["tensors"]:
        if acc.SummaryMetadata(tag).plugin_data.plugin_name != "scalars":
            continue
        out[tag] = [ScalarEvent(e.step, float(tensor_util.make_ndarray(e.tensor_proto)),
                                e.wall_time) for e in acc.Tensors(tag)]
    return out


def digit_images(n: int, side: int = 28, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``n`` random uint8 images ``side`` x ``side`` and their labels 0-9: a data file's
    content (.npz, TFRecord) as a user's script writes it."""
    rng = np.random.default_rng(seed)
    return (rng.integers(0, 256, (n, side, side), dtype=np.uint8),
            rng.integers(0, 10, n).astype(np.int64))


def process_alive(pid: int) -> bool:
    """Whether ``pid`` still runs; a zombie not yet reaped by its parent counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def split_own_lines(stderr: bytes, command: str) -> tuple[bytes, bytes, bytes]:
    """A watched command's stderr under `gpudiag monitor|run`: gpudiag's own lines before it
    started (the banner, NVML's state), the command's stderr (with any ``gpudiag:`` line
    said while it ran), gpudiag's own lines after it ended (the findings, each a line
    ``OK    run.command: ...`` and its wrapped lines indented by six spaces, then the
    verdict: a crashed program's crash entry first, then ``gpudiag <command>: N failed``). A
    command whose stderr ends without a newline has the first finding follow on its last
    line."""
    lines = stderr.splitlines(keepends=True)
    start = sum(len(ln) for ln in lines[:next(
        i for i, ln in enumerate(lines)
        if b"without GPU sampling" in ln or b"GPU(s) every" in ln) + 1])
    name = re.escape(command.encode())
    finding = rb"(?:OK|WARN|FAIL|SKIP) +" + name + rb"\.[^\n]*\n(?: {6}[^\n]*\n)*"
    crash = rb"(?:crash: [^\n]*\n(?: {2,}[^\n]*\n)*)?"  # the verdict's first entry, if any
    ends = list(re.finditer(rb"(?:" + finding + rb")+\n?" + crash + rb"gpudiag " + name
                            + rb": \d+ failed", stderr))
    end = ends[-1].start() if ends else len(stderr)
    return stderr[:start], stderr[start:end], stderr[end:]


@dataclass
class ProgramRun:
    """One `gpudiag run` of a program: what the terminal got, the run directory, its report."""

    returncode: int
    stdout: str
    stderr: str
    run_dir: Path
    report: dict[str, Any]

    @property
    def found(self) -> dict[str, dict[str, Any]]:
        return findings_by_id(self.report)

    def saved(self, name: str) -> str:
        """A file of the program's child directory (its saved stdout, stderr ...)."""
        from gpudiag import layout

        return (self.run_dir / layout.CHILDREN_DIR / layout.RUN_CHILD_NAME / name).read_text()


def run_program(tmp: Path, *command: str, options: tuple[str, ...] = ()) -> ProgramRun:
    """``gpudiag run [options] -- command`` with a logdir under ``tmp``; its one run
    directory's report, checked against the report's JSON Schema."""
    logdir = tmp / "runs"
    proc = gpudiag("run", "--logdir", str(logdir), *options, "--", *command, timeout=300)
    (run_dir,) = run_dirs(logdir)
    return program_run(proc.returncode, proc.stdout, proc.stderr, run_dir)


def program_run(returncode: int, stdout: str, stderr: str, run_dir: Path) -> ProgramRun:
    """A `gpudiag run`'s run directory with what it printed; its report checked against the
    report's JSON Schema."""
    import jsonschema

    report = load_report(run_dir)
    schema = json.loads((REPO / "gpudiag" / "report.schema.json").read_text())
    jsonschema.validate(report, schema)
    return ProgramRun(returncode, stdout, stderr, run_dir, report)


PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def breakdown_picture(run_dir: Path) -> tuple[int, int, bytes, str]:
    """The report run's step breakdown as TensorBoard reads it back: the image's width,
    height and PNG bytes (layout.TAG_BREAKDOWN_PLOT, the Images tab's plugin), and the
    bottleneck findings' text card (layout.TAG_BOTTLENECK); each checked to be what it
    says (a PNG of a plausible size, the image plugin's tag, the text before the summary)."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.util import tensor_util

    from gpudiag import layout
    from gpudiag.rundir.loops import tensorboard_without_tensorflow

    tensorboard_without_tensorflow()
    acc = EventAccumulator(str(run_dir / layout.REPORT_TB_RUN),
                           size_guidance={"tensors": 0})
    acc.Reload()
    assert acc.SummaryMetadata(layout.TAG_BREAKDOWN_PLOT).plugin_data.plugin_name == "images"
    (event,) = acc.Tensors(layout.TAG_BREAKDOWN_PLOT)
    width, height, png = tensor_util.make_ndarray(event.tensor_proto)
    assert png[:8] == PNG_MAGIC and 10_000 < len(png) < 2_000_000, len(png)
    assert png == (run_dir / layout.BREAKDOWN_PNG).read_bytes()
    assert (int(width), int(height)) == (int.from_bytes(png[16:20]), int.from_bytes(png[20:24]))
    assert 600 <= int(width) <= 2000 and 150 <= int(height) <= 3000, (width, height)
    (text,) = acc.Tensors(layout.TAG_BOTTLENECK)
    texts = sorted(t for t in acc.Tags()["tensors"]
                   if acc.SummaryMetadata(t).plugin_data.plugin_name == "text")
    # the Text tab's first card is the short verdict, the bottleneck findings next
    assert texts[:2] == [layout.TAG_VERDICT, layout.TAG_BOTTLENECK], texts
    return int(width), int(height), bytes(png), text.tensor_proto.string_val[0].decode()


@contextlib.contextmanager
def ended(proc: subprocess.Popen[Any]) -> Iterator[subprocess.Popen[Any]]:
    """The process, killed and reaped on the way out when the test leaves it running (an
    assertion failed while the program waited for its gate)."""
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()


def until(condition, what: str, deadline_s: float = 30.0):  # type: ignore[no-untyped-def]
    """Poll a file-backed condition (no fixed sleep) until it holds; fail after
    ``deadline_s``."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"not within {deadline_s} s: {what}")


# ------------------------------------------------------------------ the real browser

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync"]


def browser_missing() -> str | None:
    """Why the browser tests cannot run here (None: they can)."""
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the playwright package is not installed (pip install -e '.[test]')"
    if not CHROMIUM.exists():
        return f"{CHROMIUM} is missing (apt-get install chromium; `make test` does it as root)"
    return None


@contextlib.contextmanager
def local_chromium(url: str) -> Iterator[Any]:
    """Debian's chromium through playwright, a fresh profile, every request to a host other
    than ``url``'s aborted: yields the browser context (skips the test where there is none)."""
    import shutil
    import tempfile
    from urllib.parse import urlparse

    missing = browser_missing()
    if missing:
        pytest.skip(missing)
    from playwright.sync_api import sync_playwright

    profile = tempfile.mkdtemp(prefix="gpudiag-chromium-")
    local = urlparse(url).hostname or "localhost"
    try:
        with sync_playwright() as pw:
            context = pw.chromium.launch_persistent_context(
                profile, executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_FLAGS,
                viewport={"width": 1600, "height": 1000})
            context.route("**/*", lambda route: route.continue_()
                          if urlparse(route.request.url).hostname == local else route.abort())
            yield context
            context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def screenshot(page: Any, name: str, tmp_path: Path) -> None:
    """A picture of the page: into GPUDIAG_SCREENSHOTS (`make screenshots`) or tmp_path."""
    out = Path(os.environ.get("GPUDIAG_SCREENSHOTS") or tmp_path)
    out.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(out / f"{name}.png"))


# ------------------------------------------------------------------ plain data


def breakdown(*rows: tuple[str, float, float, float, float, float, float, float],
              skew: float | None = None, source: str = "placement",
              idle: tuple[str, ...] = ()) -> Any:
    """A step breakdown made of plain numbers (gpudiag.readers.stepbreakdown's records).
    rows: (device, period, compute, communication, input, host, idle, between) in ms."""
    from gpudiag.readers.steprecords import Breakdown, DeviceBreakdown, StepParts

    devices = []
    for device, *ms in rows:
        parts = StepParts("0", *(x / 1e3 for x in ms))
        devices.append(DeviceBreakdown(device, source, [parts, parts], 100))
    devices += [DeviceBreakdown(d, source, [StepParts("0", 0.01, 0, 0, 0, 0, 0.01)], 0)
                for d in idle]
    return Breakdown("t.xplane.pb", "host step markers", ["0", "1"], devices, list(idle), skew)


#: The line a try run's fixes go on (write_try_run), and each round's median steps (s):
#: the program as written, the parallel map, prefetch.
TRY_LINE = "dataset = dataset.map(augment).batch(32)"
TRY_ROUNDS = ((0.0331, 0.0172, 0.0335), (0.0352, 0.0181, 0.0349), (0.0340, 0.0175, 0.0345))


def write_try_run(logdir: Path) -> Path:
    """A `gpudiag try` run directory under ``logdir`` written by gpudiag's own writer
    (RunSession) from recorded trials, without running a program: three rounds where the
    parallel map at train.py:48 halves the step and prefetch changes nothing, a cache
    advised but not tried; its findings and data.try.headline as `gpudiag try` makes
    them (gpudiag.verdicts.trial). Its run directory."""
    from gpudiag import layout
    from gpudiag.fixes import Chosen
    from gpudiag.fixes.choice import NotTried
    from gpudiag.records.trial import TrialFix
    from gpudiag.session import RunSession
    from gpudiag.verdicts import trial as v

    fixes = [Chosen(TrialFix("parallel-map", "map", "train.py", 48), TRY_LINE,
                    TRY_LINE.replace("map(augment)", "map(augment, num_parallel_calls="
                                     "tf.data.AUTOTUNE)"), (0.15, 0.08, 0.35)),
             Chosen(TrialFix("prefetch", "batch", "train.py", 48), TRY_LINE,
                    TRY_LINE + ".prefetch(tf.data.AUTOTUNE)", (0.85, 0.66, 0.96))]
    trials = [v.Trial(fix, r, step, 0, None,
                      f"runs/{layout.trial_dir_name(r, fix or layout.TRY_AS_WRITTEN)}")
              for r, steps in enumerate(TRY_ROUNDS, 1)
              for fix, step in zip(("", "parallel-map", "prefetch"), steps, strict=True)]
    with RunSession("try", logdir) as session:
        for c in fixes:
            session.add(v.fix_finding(c, trials))
        result = v.result_finding(fixes, trials, 100)
        session.set(layout.TRY_DATA, {"headline": result.evidence["headline"]})
        session.add(result)
        not_tried = v.not_tried_finding([NotTried("call .cache() after the map", "train.py:48",
                                                  (0.4, 0.2, 0.7), "not asked for (--fix)")])
        assert not_tried is not None
        session.add(not_tried)
    return session.run_dir
