"""`make demo`: one full diagnosis on the embedded default, then where to look.

Runs each gpudiag command in turn into one logdir (virtual CPU devices when there is no
GPU), prints every run directory and the command that opens TensorBoard on them. Exits
non-zero only when a command could not run (exit code 2 or more); failed checks are
results, shown in the tables. The last step runs a small user-like Keras script
(gpudiag/examples/keras_mnist_like.py) under `gpudiag run`, as a user runs their own
program.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from gpudiag.layout import REPORT_JSON
from gpudiag.verdicts import headline

# A few seconds of TensorFlow matmuls for `gpudiag monitor` to watch (any command would do).
MONITOR_WORKLOAD = (
    "import tensorflow as tf\n"
    "x = tf.random.normal([1024, 1024])\n"
    "for _ in range(60):\n"
    "    x = tf.linalg.matmul(x, x) / 32.0\n"
    "print('demo workload done:', x.shape)\n"
)

# Each entry: the gpudiag arguments of one step of the diagnosis.
STEPS: list[list[str]] = [
    ["env"],
    ["placement"],
    ["memory"],
    ["scaling", "--max-gpus", "4"],
    ["monitor", "--", sys.executable, "-c", MONITOR_WORKLOAD],
    # A user-like Keras script (MirroredStrategy, Model.fit), run unmodified under gpudiag.
    ["run", "--", sys.executable, "-m", "gpudiag.examples.keras_mnist_like"],
]


def _state(run_dir: Path | None, code: int) -> str:
    """One step's outcome in a few words: where its devices line is known, that line
    (never "all checks passed" for work that ran on the CPU because there is no GPU)."""
    if code >= 2 or run_dir is None or not (run_dir / REPORT_JSON).is_file():
        return f"could not run (exit code {code})"
    report = json.loads((run_dir / REPORT_JSON).read_text(encoding="utf-8"))
    counts = headline.counts_line(report).split(": ", 1)[1]
    devices = headline.devices_line(report)
    return f"{counts}" + (f"\n    {devices}" if devices else "")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", type=Path, default=Path("runs"))
    args = parser.parse_args()
    worst = 0
    runs: list[tuple[str, Path | None, int]] = []
    for step in STEPS:
        before = set(args.logdir.glob("*")) if args.logdir.is_dir() else set()
        # --logdir right after the command name: after `monitor --` it would be the workload's
        cmd = [sys.executable, "-m", "gpudiag", step[0], "--logdir", str(args.logdir), *step[1:]]
        name = " ".join(step) if "--" not in step else (
            f"{step[0]} -- python -m {step[-1]}" if step[-2:-1] == ["-m"]
            else f"{step[0]} -- <a TensorFlow workload>")
        print(f"\n$ gpudiag {name} --logdir {args.logdir}", flush=True)
        code = subprocess.call(cmd)
        new = sorted(set(args.logdir.glob("*")) - before) if args.logdir.is_dir() else []
        runs.append((name, new[-1] if new else None, code))
        if code >= 2:
            worst = max(worst, code)
    print("\nDiagnosis done. Run directories:")
    for name, run_dir, code in runs:
        print(f"  gpudiag {name}\n    {run_dir}: {_state(run_dir, code)}")
    last = runs[-1][1]
    if last is not None and (last / REPORT_JSON).is_file():
        report = json.loads((last / REPORT_JSON).read_text(encoding="utf-8"))
        print("\nYour program's verdict (the `run` step):")
        print("\n".join(f"  {line}" for line in headline.verdict(report)[1:]))
    print(f"\nOpen the dashboard (the GPUDIAG tab):\n  .venv/bin/gpudiag tensorboard "
          f"{args.logdir}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
