"""The input-bound verdict on a loaded machine: does gpudiag's input share agree with the
program's own clock run after run while other work holds the cores?

The program is tests/programs/custom_loop_input_bound.py (keras-io's custom loop fed by
a tf.data pipeline with a serial ``map``), which times its own steps start to start and
its own seconds inside ``next()``. Each round runs it plainly, then under `gpudiag run`,
with ``--load`` busy processes (pure Python loops, default: one per core) spinning the
whole time. Printed per round: the share of the program's own clock (plain, and under
gpudiag), gpudiag's share over the whole run (run.throughput's ``input``, what
run.bottleneck decides by) and the share of the 4 profiled steps alone (the window, which
only explains), each difference in points from the own clock of the same run. Then the
spread of the own share plain against plain over the rounds (the machine's own noise),
the window's largest difference, and last the whole run's largest difference.

    python benchmarks/why_slow_load.py [--rounds 5] [--load N]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PROGRAM = REPO / "tests" / "programs" / "custom_loop_input_bound.py"
WARMUP = 10  # gpudiag run's default --profile-warmup: the steps its share leaves out


def own_share(stdout: str) -> float:
    periods = json.loads(stdout.split("own periods:")[1].splitlines()[0])
    waits = json.loads(stdout.split("own waits:")[1].splitlines()[0])
    pairs = [(p, waits[i]) for i, p in enumerate(periods) if p is not None and i >= WARMUP]
    return sum(w for _, w in pairs) / sum(p for p, _ in pairs)


def spin() -> None:
    while True:
        pass


def plain() -> float:
    proc = subprocess.run([sys.executable, str(PROGRAM)], capture_output=True, text=True,
                          timeout=600, check=True)
    return own_share(proc.stdout)


def hooked() -> tuple[float, float, float | None]:
    """The own share, gpudiag's whole-run share and its profiled window's share."""
    with tempfile.TemporaryDirectory() as logdir:
        proc = subprocess.run(
            [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, "--",
             sys.executable, str(PROGRAM)], capture_output=True, text=True, timeout=600,
            env={**os.environ, "PYTHONPATH": str(REPO)})
        (report,) = Path(logdir).glob("*/report.json")
        found = {f["id"]: f for f in json.loads(report.read_text())["findings"]}
    (loop,) = found["run.throughput"]["evidence"]["loops"]
    window = (found["run.bottleneck"]["evidence"].get("shares") or {}).get("input")
    return own_share(proc.stdout), loop["input"]["share"], window


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--load", type=int, default=len(os.sched_getaffinity(0)))
    args = parser.parse_args()
    spinners = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.load)]
    for p in spinners:
        p.start()
    plains, whole, windowed = [], [], []
    try:
        for r in range(args.rounds):
            before = plain()
            own, run_share, window = hooked()
            plains.append(before)
            whole.append(run_share - own)
            if window is not None:
                windowed.append(window - own)
            print(f"round {r + 1} ({args.load} busy processes, load average "
                  f"{os.getloadavg()[0]:.1f}): own share plain {before:.1%}, under gpudiag "
                  f"{own:.1%}; gpudiag whole run {run_share:.1%} ({(run_share - own) * 100:+.1f} "
                  f"points), profiled window "
                  + (f"{window:.1%} ({(window - own) * 100:+.1f} points)" if window is not None
                     else "none"))
    finally:
        for p in spinners:
            p.terminate()
            p.join()
    print(f"own share, plain, over {len(plains)} rounds: {min(plains):.1%} to {max(plains):.1%} "
          f"(spread {(max(plains) - min(plains)) * 100:.1f} points)")
    if windowed:
        print(f"profiled window against the own clock: largest difference "
              f"{max(abs(d) for d in windowed) * 100:.1f} points")
    print(f"whole run against the own clock: largest difference "
          f"{max(abs(d) for d in whole) * 100:.1f} points")


if __name__ == "__main__":
    main()
