"""The terminal, command by command, as a new user meets it at COLUMNS=80 and 120: a real
`gpudiag run` of a Keras fit with a slow per-example ``map`` (tests/programs/
input_pipeline_fit.py), the same program with tf.data's fixes, `gpudiag diff` of the two,
`gpudiag explain` of a real GPU trace (tests/data/gpu_traces) and `gpudiag scaling
--max-gpus 2`. No line gpudiag prints ends cut ("..." or the ellipsis), every line is under
the terminal's width and the verdict's under 80 columns, the verdict is at most six entries, names
the action and its file:line, and `diff`'s first verdict line is the result said the right
way round with its interval (gpudiag.verdicts.headline, gpudiag.execute)."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from golden import GoldenRuns
from helpers import TESTS_DIR, gpudiag

from gpudiag.rundir import load_run

TRACE = TESTS_DIR / "data" / "gpu_traces" / "t4_input_bound"
CUT = ("...", "\u2026")

pytestmark = pytest.mark.slow


def _env(columns: int) -> dict[str, str]:
    return {"COLUMNS": str(columns), "TERM": "dumb"}


def _verdict(out: str) -> list[str]:
    """The verdict's entries (the lines after the last blank line; a wrapped entry's
    indented lines joined to it)."""
    entries: list[str] = []
    for ln in out.rstrip("\n").split("\n\n")[-1].splitlines():
        if ln.startswith(" ") and entries:
            entries[-1] += " " + ln.strip()
        else:
            entries.append(ln)
    return entries


def _whole(out: str, columns: int) -> None:
    """Every line gpudiag printed fits the terminal and none ends cut; the verdict's lines
    are under 80 columns whatever the terminal's width, six entries at most."""
    for ln in out.splitlines():
        assert len(ln) <= columns, ln
        assert not ln.rstrip().endswith(CUT), ln
    tail = out.rstrip("\n").split("\n\n")[-1].splitlines()
    assert all(len(ln) < 80 for ln in tail), tail
    assert len(_verdict(out)) <= 6, _verdict(out)


def _own(stderr: str) -> str:
    """gpudiag's own lines of `run`'s stderr: its banner up to the line on NVML, then from
    the first finding on (the program's stderr, TensorFlow's noise, comes between)."""
    lines = stderr.splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if "without GPU sampling" in ln or "GPU(s) every" in ln) + 1
    end = next(i for i, ln in enumerate(lines) if re.match(r"(OK|WARN|FAIL|SKIP) +run\.", ln))
    return "\n".join(lines[:start] + lines[end:])


@pytest.fixture
def pair(pipeline_pair: GoldenRuns) -> tuple[Path, dict[int, str], Path, Path]:
    """The slow-map fit (printed at 80 columns) and its fix (at 120), profiled in the
    second epoch (the golden pair, tests/golden.py); gpudiag's own lines are on stderr
    (`run`'s stdout is the program's)."""
    a, b = pipeline_pair.run_dirs
    printed = {80: pipeline_pair.printed[0].stderr, 120: pipeline_pair.printed[1].stderr}
    return pipeline_pair.logdir, printed, a, b


def test_run_names_the_bottleneck_the_action_and_its_line(
        pair: tuple[Path, dict[int, str], Path, Path]) -> None:
    _, printed, _, _ = pair
    for columns, err in printed.items():
        _whole(_own(err), columns)
        verdict = _verdict(err)
        assert [e.split(":")[0] for e in verdict] == [
            "gpudiag run", "devices", "bottleneck", "learning", "report", "dashboard"], verdict
        fix = verdict[2]
        assert re.search(r"fix at input_pipeline_fit\.py:\d+: ", fix), (columns, fix)
    # the slow map's: what to change at its line, from the report (on a loaded 2-core
    # machine the same fit is sometimes overhead-bound rather than input-bound: the fix
    # is then steps_per_execution at its compile line)
    _, _, a, _ = pair
    found = next(f for f in load_run(a).report.findings if f.id == "run.bottleneck")
    slow = _verdict(printed[80])[2]
    if found.actions:
        what = " ".join(found.actions[0].what.split())
    else:  # a report without actions: the advice's clause that names the line
        what = "num_parallel_calls=tf.data.AUTOTUNE" if "input-bound" in found.evidence.get(
            "causes", []) else "steps_per_execution"
    assert what in slow, (what, slow)
    if found.evidence.get("predicted", {}).get("step_s") or any(
            a.predicted and a.predicted.step_s for a in found.actions):
        assert re.search(r"predicted \d+(\.\d+)? -> \d+(\.\d+)? ms a step", slow), slow
    # report.md opens with the same verdict, entry by entry, the fix under the bottleneck
    md = (a / "report.md").read_text().split("## Verdict\n\n", 1)[1].split("\n\n", 1)[0]
    items: list[str] = []
    for ln in md.splitlines():
        text = re.sub(r"\\([*_`\[\]<>])", r"\1", ln.lstrip(" ").removeprefix("- "))
        if ln.startswith("  - "):
            items[-1] += " " + text
        else:
            items.append(text)
    assert items == [" ".join(e.split()) for e in _verdict(printed[80])[:-2]], (items, md)


def test_diff_says_first_how_much_faster_with_its_interval(
        pair: tuple[Path, dict[int, str], Path, Path], tmp_path: Path) -> None:
    _, _, a, b = pair
    for columns in (80, 120):  # the runs named from the user's directory, as typed
        proc = gpudiag("diff", "--logdir", "runs", os.path.relpath(a, tmp_path),
                       os.path.relpath(b, tmp_path), env=_env(columns), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr[-2000:]
        _whole(proc.stdout, columns)
        first = _verdict(proc.stdout)[0]
        assert re.fullmatch(r"B is \d+\.\d\dx faster \(95 % CI \d+\.\d\d-\d+\.\d\d\): "
                            r"\d+(\.\d+)? -> \d+(\.\d+)? ms a step", first), first
        assert "x0." not in proc.stdout


def test_explain_of_a_gpu_trace_names_the_bottleneck_whole(tmp_path: Path) -> None:
    for columns in (80, 120):
        proc = gpudiag("explain", "--logdir", f"runs{columns}", str(TRACE),
                       env=_env(columns), cwd=tmp_path, timeout=240)
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        _whole(proc.stdout, columns)
        neck = next(e for e in _verdict(proc.stdout) if e.startswith("bottleneck: "))
        assert "input" in neck, neck


def test_scaling_on_two_devices_prints_whole_lines(scaling_two: GoldenRuns) -> None:
    """At 80 columns, profiled (its bottleneck entries: the longest lines: tests/golden.py's
    scaling run); a wider terminal is the same wrapping with room to spare (the run
    commands above hold both)."""
    proc = scaling_two.printed[0]
    _whole(proc.stdout, 80)
    assert [e.split(":")[0] for e in _verdict(proc.stdout)][:2] == ["gpudiag scaling",
                                                                    "devices"]


def test_a_python_without_tensorflow_is_named_with_the_two_ways_out(tmp_path: Path) -> None:
    """The program's `python` has no TensorFlow while gpudiag's has: one entry names that
    interpreter, gpudiag's, and installing TensorFlow into it, whole at 80 columns."""
    import importlib.util
    import subprocess

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("gpudiag's own Python has no TensorFlow here")
    bare = tmp_path / "bare"  # a virtual environment of the same Python, nothing installed
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True,
                   timeout=120)
    if subprocess.run([str(bare / "bin" / "python"), "-c", "import tensorflow"],
                      capture_output=True, timeout=120).returncode == 0:
        pytest.skip("the base Python has TensorFlow: no interpreter without it here")
    (tmp_path / "train.py").write_text("import tensorflow as tf\nprint(tf.__version__)\n")
    python = Path("bare", "bin", "python")  # as the user types it (a path, not one word
    proc = gpudiag("run", "--logdir", "runs", "--", str(python), "train.py", env=_env(80),
                   cwd=tmp_path)  # longer than the terminal)
    assert proc.returncode == 1, proc.stderr[-2000:]
    _whole(_own(proc.stderr), 80)
    (fix,) = [e for e in _verdict(proc.stderr) if e.startswith("fix: ")]
    assert fix == (f"fix: {python} has no TensorFlow; gpudiag's Python has it: run the "
                   f"program with {sys.executable}, or install TensorFlow into {python} "
                   f"({python} -m pip install tensorflow)"), fix
