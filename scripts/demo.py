"""`make demo`: one full diagnosis on the embedded default, then where to look.

Runs each gpudiag command into one logdir (virtual CPU devices when there is no GPU),
prints every run directory and the command that opens TensorBoard on them. The first
steps (env, placement, memory) time nothing, so they run side by side and their output
is shown in order; the steps that measure time (scaling, monitor, run, try) run alone.
Exits non-zero only when a command could not run (exit code 2 or more); failed checks are
results, shown in the tables.

The last two steps are a user's: TRAIN_PY (gpudiag/examples/input_bound_fit.py), a Keras
fit fed by a per-example ``Dataset.map`` whose Python waits 2 ms an example (a read's
latency; input-bound: a real bottleneck), written to <logdir>/demo/train.py, is
run under `gpudiag run`; then `gpudiag try --from` that run measures the advised parallel
map on it, unedited, in rounds against the program as written. The closing lines give the
measured fix and the line to change; the TensorBoard command printed last opens the GPUDIAG
tab on the try run (the newest run that answers a question: gpudiag.rundir.opens_on, which
passes over the trials inside it), its card "fixes tried" first.

Each step is printed as a command the user can paste as it is (options before `--`:
`.venv/bin/gpudiag run --logdir runs -- .venv/bin/python -m ...`). The steps that run a
program (monitor, run) pass its output through as it comes, less TensorFlow's own C++ log
(``I0000 ... cpu_feature_guard.cc``, ``E0000 ... cuInit``: gpudiag.run.cpplog.CppLog),
which is saved whole with the rest of that step's output in <logdir>/demo-<step>.log.
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from gpudiag import examples
from gpudiag.layout import REPORT_JSON
from gpudiag.run.cpplog import CppLog
from gpudiag.rundir import RunDirError, load_run
from gpudiag.verdicts import headline

# A few seconds of TensorFlow matmuls for `gpudiag monitor` to watch (any command would do):
# one line, so that the command shown can be pasted as it is.
MONITOR_WORKLOAD = (
    "import functools, tensorflow as tf; x = functools.reduce(lambda x, _: "
    "tf.linalg.matmul(x, x) / 32.0, range(60), tf.random.normal([1024, 1024])); "
    "print('demo workload done:', x.shape)"
)

#: The user's program of the last two steps (gpudiag/examples/input_bound_fit.py), copied
#: to <logdir>/demo/train.py: input-bound, a real bottleneck.
TRAIN_PY = Path(examples.__file__).parent / "input_bound_fit.py"
#: `gpudiag try`'s bounds in the demo: 3 rounds (the fewest whose interval can decide), each
#: trial's fit stopped after its warm-up and 40 steps, the advised parallel map only (the
#: other advised fixes: `gpudiag try` without --fix).
TRY_OPTIONS = ["--rounds", "3", "--steps", "40", "--fix", "parallel-map"]


def train_py(logdir: Path) -> Path:
    return logdir / "demo" / "train.py"


def steps(logdir: Path) -> list[list[str]]:
    """Each entry: the gpudiag arguments of one step of the diagnosis (the try step gets
    ``--from`` the run step's run directory when it runs)."""
    train = str(train_py(logdir))
    return [
        ["env"],
        ["placement"],
        ["memory"],
        ["scaling", "--max-gpus", "4"],
        ["monitor", "--", sys.executable, "-c", MONITOR_WORKLOAD],
        ["run", "--", sys.executable, train],  # the user's program, as written
        ["try", *TRY_OPTIONS, "--", sys.executable, train],  # the advised fix, measured
    ]


#: How many of the first steps measure no time and may run side by side.
SIDE_BY_SIDE = 3


def _state(run_dir: Path | None, code: int) -> list[str]:
    """One step's outcome in a few words: where its devices line is known, that line
    (never "all checks passed" for work that ran on the CPU because there is no GPU)."""
    if code >= 2 or run_dir is None or not (run_dir / REPORT_JSON).is_file():
        return [f"could not run (exit code {code})"]
    report = _report(run_dir)
    if report is None:
        return [f"could not run (exit code {code})"]
    devices = headline.devices_line(report)
    return [headline.counts_line(report).split(": ", 1)[1], *([devices] if devices else [])]


def _said(text: str, indent: int) -> str:
    """``text`` wrapped under 80 columns at ``indent``, never cut (headline.wrap_entry)."""
    lines = headline.wrap_entry((text,), headline.WIDTH - indent)
    return "\n".join(" " * indent + ln for ln in lines)


def _report(run_dir: Path) -> dict[str, Any] | None:
    try:
        return load_run(run_dir).report_json
    except RunDirError:
        return None


def _typed(path: str) -> str:
    """``path`` as the user types it here: relative to the working directory when under it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except (ValueError, OSError):
        return path


def _gpudiag() -> list[str]:
    """How the user runs gpudiag here: the venv's script, else its Python's -m."""
    script = Path(sys.executable).parent / "gpudiag"
    return [_typed(str(script))] if script.is_file() else [_typed(sys.executable), "-m",
                                                           "gpudiag"]


def _command(step: list[str], logdir: Path) -> tuple[str, list[str]]:
    """The step as the user can paste it (options before ``--``; this Python as its path),
    and its command line."""
    shown = [*_gpudiag(), step[0], "--logdir", str(logdir),
             *(_typed(a) if a == sys.executable else a for a in step[1:])]
    return shlex.join(shown), [sys.executable, "-m", "gpudiag", step[0], "--logdir",
                               str(logdir), *step[1:]]


def _filtered(cmd: list[str], saved: Path) -> tuple[int, int]:
    """Run ``cmd``, its output (stdout and stderr) shown as it comes less TensorFlow's C++
    log lines, all of it saved in ``saved``; the exit code and the lines kept out."""
    saved.parent.mkdir(parents=True, exist_ok=True)
    cpp, hidden = CppLog(), 0
    with saved.open("wb") as out, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) as proc:
        assert proc.stdout is not None
        for raw in proc.stdout:
            out.write(raw)
            if cpp(raw.decode("utf-8", "replace").rstrip("\r\n")):
                hidden += 1
                continue
            sys.stdout.buffer.write(raw)
            sys.stdout.flush()
    return proc.returncode, hidden


def _side_by_side(steps: list[list[str]], logdir: Path) -> list[tuple[str, Path | None, int]]:
    """Steps that time nothing, started together; each one's output shown whole, in order."""
    before = set(logdir.glob("*")) if logdir.is_dir() else set()
    started = []
    for step in steps:
        name, cmd = _command(step, logdir)
        started.append((step, name, subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)))
    outputs = [(step, name, proc.communicate()[0], proc.returncode)
               for step, name, proc in started]
    new = set(logdir.glob("*")) - before if logdir.is_dir() else set()
    runs = []
    for step, name, out, code in outputs:
        print(f"\n$ {name}", flush=True)
        sys.stdout.buffer.write(out)
        sys.stdout.flush()
        made = sorted(d for d in new if d.name.endswith(f"-{step[0]}") and d.is_dir())
        runs.append((f"gpudiag {step[0]}", made[-1] if made else None, code))
    return runs


def _one(step: list[str], logdir: Path) -> tuple[str, Path | None, int]:
    """Run one step alone; its name, run directory and exit code."""
    before = set(logdir.glob("*")) if logdir.is_dir() else set()
    name, cmd = _command(step, logdir)
    print(f"\n$ {name}", flush=True)
    if "--" in step:  # a program's output: TensorFlow's C++ log kept out, saved whole
        saved = logdir / f"demo-{step[0]}.log"
        code, hidden = _filtered(cmd, saved)
        if hidden:
            print(_said(f"({hidden} lines of TensorFlow's own C++ log kept out of "
                        f"this terminal; the whole output: {saved})", 0))
    else:
        code = subprocess.call(cmd)
    new = sorted(d for d in set(logdir.glob("*")) - before if d.is_dir()) \
        if logdir.is_dir() else []
    return f"gpudiag {step[0]}", new[-1] if new else None, code


def _from(step: list[str], run_dir: Path | None) -> list[str]:
    """The try step, taking its fixes ``--from`` the run step's diagnosis (none: its own)."""
    if step[0] != "try" or run_dir is None:
        return step
    cut = step.index("--")
    return [*step[:cut], "--from", str(run_dir), *step[cut:]]


def tried_lines(report: dict[str, Any], train: Path) -> list[str]:
    """The demo's closing lines from the try run's report: the answer's first line, then
    each fix tried with its line as written and as it would be: "the line to change" where
    the fix measured faster, else what it measured there."""
    first = ((report.get("data") or {}).get("try") or {}).get("headline")
    out = [*(headline.wrap_entry((first,), headline.WIDTH - 2) if first else [])]
    for f in report.get("findings", []):
        ev = f.get("evidence") or {}
        if not str(f.get("id", "")).startswith("try.fix.") or not ev.get("where"):
            continue
        line = str(ev["where"]).rsplit(":", 1)[-1]
        helped = ev.get("verdict") == "faster"
        out.append(f"the line to change: {train}:{line}" if helped else
                   f"the line the fix goes on ({ev.get('verdict')} here): {train}:{line}")
        if ev.get("as_written"):
            out.append(f"  as written:     {ev['as_written']}")
        if ev.get("as_it_would_be"):
            out.append(f"  as it would be: {ev['as_it_would_be']}")
    return out


def _closing(runs: list[tuple[str, Path | None, int]], logdir: Path) -> None:
    print("\nDiagnosis done. Run directories:")
    for name, run_dir, code in runs:
        print(f"  {name}: {run_dir}")
        print("\n".join(_said(ln, 4) for ln in _state(run_dir, code)))
    found = {name: _report(d) if d is not None else None for name, d, _ in runs}
    diagnosed = found.get("gpudiag run")
    if diagnosed is not None:
        print(f"\nYour program's verdict (the `run` step, {train_py(logdir)}):")
        print("\n".join("  " + ln for e in headline.entries(diagnosed)[1:]
                         for ln in headline.wrap_entry(e, headline.WIDTH - 2)))
    tried = found.get("gpudiag try")
    if tried is not None:
        print("\nThe advised fix, measured on it (the `try` step; the file was not edited):")
        print("\n".join("  " + ln for ln in tried_lines(tried, train_py(logdir))))
    tried_dir = next((d for name, d, _ in runs if name == "gpudiag try"), None)
    opens = f", opened on the try run {tried_dir}" if tried and tried_dir else ""
    print("\n" + _said(f"Open the dashboard (the GPUDIAG tab{opens}):", 0) + "\n  "
          + shlex.join([*_gpudiag(), "tensorboard", str(logdir)]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", type=Path, default=Path("runs"))
    args = parser.parse_args()
    train = train_py(args.logdir)
    train.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TRAIN_PY, train)
    todo = steps(args.logdir)
    runs = _side_by_side(todo[:SIDE_BY_SIDE], args.logdir)
    for step in todo[SIDE_BY_SIDE:]:
        diagnosed = next((d for name, d, _ in runs if name == "gpudiag run"), None)
        runs.append(_one(_from(step, diagnosed), args.logdir))
    _closing(runs, args.logdir)
    return max([0, *(code for _, _, code in runs if code >= 2)])


if __name__ == "__main__":
    sys.exit(main())
