"""`make demo`: one full diagnosis on the embedded default, then where to look.

Runs each gpudiag command in turn into one logdir (virtual CPU devices when there is no
GPU), prints every run directory and the command that opens TensorBoard on them. Exits
non-zero only when a command could not run (exit code 2 or more); failed checks are
results, shown in the tables.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

# Each entry: the gpudiag arguments of one step of the diagnosis.
STEPS: list[list[str]] = [
    ["env"],
    ["placement"],
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--logdir", type=Path, default=Path("runs"))
    args = parser.parse_args()
    worst = 0
    runs: list[tuple[str, Path | None, int]] = []
    for step in STEPS:
        before = set(args.logdir.glob("*")) if args.logdir.is_dir() else set()
        cmd = [sys.executable, "-m", "gpudiag", *step, "--logdir", str(args.logdir)]
        print(f"\n$ gpudiag {' '.join(step)} --logdir {args.logdir}", flush=True)
        code = subprocess.call(cmd)
        new = sorted(set(args.logdir.glob("*")) - before) if args.logdir.is_dir() else []
        runs.append((" ".join(step), new[-1] if new else None, code))
        if code >= 2:
            worst = max(worst, code)
    print("\nDiagnosis done. Run directories:")
    for name, run_dir, code in runs:
        state = {0: "all checks passed", 1: "a check failed"}.get(code, f"exit code {code}")
        print(f"  gpudiag {name:<28} {run_dir}  ({state})")
    print(f"\nOpen TensorBoard on them:\n  .venv/bin/gpudiag tensorboard {args.logdir}")
    return worst


if __name__ == "__main__":
    sys.exit(main())
