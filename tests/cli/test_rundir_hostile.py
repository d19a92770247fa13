"""One bad file never blinds or hangs a reader of run directories (issue 36, items 2-5).

On real files: report.json malformed inside (a finding that is a string, deep nesting,
a data section that is a list, NaN in evidence, schema_version true/-7/0), a FIFO where
report.json or a child's config.json belongs (never opened: a reader that opened it would
block for ever), symlinks out of the run directory and symlink loops, a 2 GB sparse
report.json (refused by its size). load_run says each in one RunDirError naming the field;
scan_runs lists the good runs and each bad one with why; `gpudiag diff` and `gpudiag
tensorboard --check` say one line and exit 2 before writing anything. The diff's verdict
says A and B being one directory, a run still running, and step times dropped as
impossible (negative, not finite, 1e308). docs/reliability.md counts these cases.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import REPO, assert_usage_error, gpudiag

from gpudiag import layout
from gpudiag.rundir import (
    Loop,
    RunDirError,
    StepPoint,
    check_confined,
    load_run,
    read_confined,
    scan_runs,
)
from gpudiag.rundir.confine import MAX_JSON_BYTES
from gpudiag.verdicts import diff as verdict

SAMPLE_RUN = next((REPO / "sample_runs" / "run").iterdir())


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst)
    return dst


def _edit(run_dir: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    file = run_dir / layout.REPORT_JSON
    data = json.loads(file.read_text())
    change(data)
    file.write_text(json.dumps(data))  # allow_nan: Python writes NaN where it is told to
    return run_dir


def _set_data(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["data"].__setitem__(key, value)


def _set_evidence(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["findings"][0]["evidence"].__setitem__(key, value)


def _set_top(key: str, value: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d.__setitem__(key, value)


# ---------------------------------------------------------------- diff and --check
DIFF_CASES = [
    ("findings-a-string", _set_top("findings", ["x"]), "findings[0] is str"),
    ("data-run-a-list", _set_data("run", [1]), "data.run is list"),
    ("schema-version-true", _set_top("schema_version", True), "schema_version is True"),
    ("nan-in-evidence", _set_evidence("x", math.nan), "is nan"),
    ("no-command", lambda d: d.pop("command"), "not a gpudiag report"),
    ("parts-a-string", lambda d: d["findings"].append(
        {"id": "run.bottleneck", "status": "warn", "message": "m", "advice": "",
         "evidence": {"parts_s": {"/gpu:0": {"period_s": "long"}}}}),
     "parts_s./gpu:0.period_s is not a number"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("change", "said"), [(c, s) for _, c, s in DIFF_CASES],
                         ids=[i for i, _, _ in DIFF_CASES])
def test_diff_of_a_malformed_run_is_one_line_before_its_run_directory(
        tmp_path: Path, change: Callable[[dict[str, Any]], None], said: str) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    bad = _edit(_copy(SAMPLE_RUN, tmp_path / "bad"), change)
    out = tmp_path / "out"
    assert_usage_error(gpudiag("diff", str(good), str(bad), "--logdir", str(out),
                               timeout=120), said, out)


@pytest.mark.slow
def test_diff_of_a_fifo_a_nul_and_a_300_character_name_is_one_line(tmp_path: Path) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    fifo = _copy(SAMPLE_RUN, tmp_path / "fifo")
    (fifo / layout.REPORT_JSON).unlink()
    os.mkfifo(fifo / layout.REPORT_JSON)
    out = tmp_path / "out"
    assert_usage_error(gpudiag("diff", str(good), str(fifo), "--logdir", str(out),
                               timeout=60), "is a FIFO", out)
    assert_usage_error(gpudiag("diff", str(good), "y" * 300, "--logdir", str(out),
                               timeout=60), "not a gpudiag run directory", out)


@pytest.mark.slow
def test_diff_of_a_run_with_itself_says_so(tmp_path: Path) -> None:
    good = _copy(SAMPLE_RUN, tmp_path / "good")
    out = tmp_path / "out"
    proc = gpudiag("diff", str(good), str(good) + "/.", "--logdir", str(out), "--json",
                   timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    caveat = next(f for f in json.loads(proc.stdout)["findings"] if f["id"] == "diff.caveats")
    assert caveat["status"] == "warn" and "A and B are one directory" in caveat["message"]


@pytest.mark.slow
def test_tensorboard_check_of_a_logdir_with_a_bad_run_is_one_line(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    _copy(SAMPLE_RUN, logdir / "good")
    _edit(_copy(SAMPLE_RUN, logdir / "bad"), _set_top("findings", ["x"]))
    assert_usage_error(gpudiag("tensorboard", str(logdir), "--check", "--port", "0",
                               timeout=60), "findings[0] is str")


SAMPLE_PLACEMENT = next((REPO / "sample_runs" / "placement").iterdir())


def _deep(n: int) -> Any:
    value: Any = 1
    for _ in range(n):
        value = {"x": value}
    return value


MALFORMED = [
    ("findings-a-string", _set_top("findings", ["x"]), "findings[0] is str"),
    ("data-run-a-list", _set_data("run", [1]), "data.run is list"),
    ("deep", _set_data("deep", _deep(200)), "nests deeper than 64"),
    ("nan-in-evidence", _set_evidence("x", math.nan), "is nan"),
    ("inf-in-evidence", _set_evidence("x", math.inf), "is inf"),
    ("schema-version-true", _set_top("schema_version", True), "schema_version is True"),
    ("schema-version-negative", _set_top("schema_version", -7), "schema_version is -7"),
    ("schema-version-zero", _set_top("schema_version", 0), "schema_version is 0"),
    ("status-unknown", lambda d: d["findings"][0].__setitem__("status", "great"),
     "findings[0].status is 'great'"),
    ("evidence-a-list", lambda d: d["findings"][0].__setitem__("evidence", [1]),
     "findings[0].evidence is list"),
    ("partial-a-string", _set_top("partial", "no"), "partial is str"),
    ("command-a-number", _set_top("command", 3), "command is 3"),
]


@pytest.mark.parametrize(("change", "said"), [(c, s) for _, c, s in MALFORMED],
                         ids=[i for i, _, _ in MALFORMED])
def test_a_malformed_report_is_one_line_naming_the_field(
        tmp_path: Path, change: Callable[[dict[str, Any]], None], said: str) -> None:
    run_dir = _edit(_copy(SAMPLE_RUN, tmp_path / "bad"), change)
    with pytest.raises(RunDirError) as caught:
        load_run(run_dir)
    assert said in caught.value.message and "\n" not in caught.value.message


def _never_blocks(fn: Callable[[], Any], timeout_s: float = 10.0) -> BaseException | None:
    """``fn`` run in a thread; it must end within ``timeout_s`` (a reader that opened a
    FIFO would block for ever); what it raised."""
    raised: list[BaseException | None] = [None]

    def call() -> None:
        try:
            fn()
        except BaseException as exc:
            raised[0] = exc

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    thread.join(timeout_s)
    assert not thread.is_alive(), "the reader blocked (it opened a FIFO)"
    return raised[0]


def test_a_fifo_for_report_json_is_refused_never_opened(tmp_path: Path) -> None:
    run_dir = _copy(SAMPLE_RUN, tmp_path / "fifo")
    (run_dir / layout.REPORT_JSON).unlink()
    os.mkfifo(run_dir / layout.REPORT_JSON)
    raised = _never_blocks(lambda: load_run(run_dir))
    assert isinstance(raised, RunDirError) and "is a FIFO, not a regular file" in raised.message


def test_a_fifo_for_a_childs_config_is_refused_and_the_listing_goes_on(tmp_path: Path) -> None:
    logdir = tmp_path / "logdir"
    good = _copy(SAMPLE_RUN, logdir / "good")
    bad = _copy(SAMPLE_PLACEMENT, logdir / "fifo-child")
    (child,) = (bad / layout.CHILDREN_DIR).iterdir()
    (child / layout.CONFIG_JSON).unlink(missing_ok=True)
    os.mkfifo(child / layout.CONFIG_JSON)
    found: list[Any] = []
    assert _never_blocks(lambda: found.append(scan_runs(logdir))) is None
    runs, refused = found[0]
    assert [r.path for r in runs] == [good]
    assert [b.path for b in refused] == [bad] and "is a FIFO" in refused[0].reason


def test_symlinks_out_of_the_run_directory_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "secret.json"
    outside.write_text((SAMPLE_RUN / layout.REPORT_JSON).read_text())
    run_dir = _copy(SAMPLE_RUN, tmp_path / "logdir" / "link")
    (run_dir / layout.REPORT_JSON).unlink()
    (run_dir / layout.REPORT_JSON).symlink_to(outside)
    with pytest.raises(RunDirError, match="resolves outside"):
        load_run(run_dir)
    probe = _copy(SAMPLE_PLACEMENT, tmp_path / "logdir" / "child-link")
    (child,) = (probe / layout.CHILDREN_DIR).iterdir()
    (child / layout.RESULT_JSON).unlink(missing_ok=True)
    (child / layout.RESULT_JSON).symlink_to(outside)
    with pytest.raises(RunDirError, match=r"result\.json is a symlink out of the run directory"):
        load_run(probe)


def test_a_symlink_loop_is_one_line(tmp_path: Path) -> None:
    run_dir = _copy(SAMPLE_RUN, tmp_path / "loop")
    (run_dir / layout.REPORT_JSON).unlink()
    (run_dir / layout.REPORT_JSON).symlink_to(run_dir / layout.REPORT_JSON)
    with pytest.raises(RunDirError, match="cannot be resolved"):
        load_run(run_dir)


def test_a_sparse_two_gb_report_is_refused_by_its_size_before_reading(tmp_path: Path) -> None:
    run_dir = _copy(SAMPLE_RUN, tmp_path / "huge")
    with (run_dir / layout.REPORT_JSON).open("r+b") as f:
        f.truncate(2 * 1024**3)  # sparse: no disk, no memory
    start = time.monotonic()
    with pytest.raises(RunDirError, match=r"above the .* bytes gpudiag reads"):
        load_run(run_dir)
    assert time.monotonic() - start < 2.0


def test_the_confinement_check_itself(tmp_path: Path) -> None:
    """gpudiag.rundir.confine: what the other readers confined to a logdir reuse."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "ok.json").write_text("{}")
    assert read_confined(root / "ok.json", root) == b"{}"
    assert check_confined(root / "ok.json", root, max_bytes=2).st_size == 2
    with pytest.raises(RunDirError, match="above the 1 bytes"):
        check_confined(root / "ok.json", root, max_bytes=1)
    with pytest.raises(RunDirError, match="is a directory"):
        read_confined(root, root)
    os.mkfifo(root / "fifo")
    with pytest.raises(RunDirError, match="is a FIFO"):
        read_confined(root / "fifo", root)
    with pytest.raises(RunDirError, match="is a character device"):
        read_confined(Path("/dev/zero"), Path("/dev"))
    with pytest.raises(RunDirError, match="resolves outside"):
        read_confined(root / ".." / "root" / ".." / "elsewhere", root)
    with pytest.raises(RunDirError, match="cannot be resolved"):
        read_confined(root / "nul\0byte", root)
    assert MAX_JSON_BYTES >= 16 * 1024 * 1024  # gpudiag's own reports: a few MB


def _loop(times: list[float]) -> Loop:
    return Loop("fit", "program-1", tuple(StepPoint(i, t, None, None)
                                          for i, t in enumerate(times)))


def _side(loop: Loop, status: str = "complete", real: str = "/a") -> verdict.Side:
    return verdict.Side(real, "run", {"fit": loop}, (), {}, [], {}, status=status, real_path=real)


def test_impossible_step_times_are_dropped_and_counted_never_divided() -> None:
    """30 of 40 negative (and 1e308, NaN, -inf): the median of the rest, with how many
    were dropped in the verdict; numbers too large to compute with never divide by 0."""
    times = [-0.01] * 27 + [1e308, math.nan, -math.inf] + [0.02] * 10
    loop = _loop(times)
    assert loop.impossible() == 30 and loop.step_times() == [0.02] * 10
    _, found = verdict.judge(_side(loop), _side(_loop([0.01] * 40), real="/b"))
    caveat = next(f for f in found if f.id == "diff.caveats")
    assert "A fit: 30 of 40 step times dropped as impossible" in caveat.message
    _, found = verdict.judge(_side(_loop([1e308] * 20 + [1e-320] * 20)),
                             _side(_loop([0.01] * 40), real="/b"))
    assert "40 of 40 step times dropped" in next(
        f for f in found if f.id == "diff.caveats").message


def test_a_running_side_and_one_directory_are_said() -> None:
    loop = _loop([0.01] * 40)
    _, found = verdict.judge(_side(loop, "running"), _side(loop))
    message = next(f for f in found if f.id == "diff.caveats").message
    assert "A is still running" in message and "A and B are one directory" in message
    _, found = verdict.judge(_side(loop), _side(loop, real="/b"))
    assert not [f for f in found if f.id == "diff.caveats"]
