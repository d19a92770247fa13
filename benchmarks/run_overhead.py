"""What `gpudiag run`'s hooks cost the user's program outside the profiled window.

The same user-like program (benchmarks/_run_workload.py: a Keras ``Model.fit`` and a
custom loop with a tf.function step, each a 784-256-10 MLP at batch 128 on generated
data) runs as a plain ``python`` process and under ``gpudiag run`` (all hooks on: the
placement log, tf.config/strategy/Session wrappers, the timed step function or fit
callback, the stream filter in the parent, NVML sampling where there is NVML). The
program times its own steps after its warm-up, which holds gpudiag's profiler window, so
the timed steps are outside it. Hooked and plain runs alternate, round after round, the
order flipping each round, in one invocation. The last line is the median per-round
ratio of step time hooked / plain over both workloads: the target is <= 1.02.

    python benchmarks/run_overhead.py [--rounds 5] [--steps 400] [--workloads fit,loop]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKLOAD = HERE / "_run_workload.py"


def step_s(output: str) -> float:
    lines = [ln for ln in output.splitlines() if ln.startswith("STEP_S ")]
    if not lines:
        raise RuntimeError(f"the workload printed no STEP_S line:\n{output[-2000:]}")
    return float(lines[-1].split()[1])


def run_once(workload: str, steps: int, hooked: bool, logdir: str) -> float:
    program = [sys.executable, str(WORKLOAD), workload, "--steps", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if hooked:
        cmd = [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, "--", *program]
    else:
        cmd = program
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode not in (0, 1):  # 1: a finding failed (no GPU here ...), not an error
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return step_s(proc.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--workloads", default="fit,loop")
    args = parser.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    ratios: dict[str, list[float]] = {w: [] for w in workloads}
    with tempfile.TemporaryDirectory(prefix="gpudiag-run-overhead-") as logdir:
        for r in range(args.rounds):
            for w in workloads:
                order = (True, False) if r % 2 == 0 else (False, True)
                times = {hooked: run_once(w, args.steps, hooked, logdir) for hooked in order}
                ratio = times[True] / times[False]
                ratios[w].append(ratio)
                print(f"round {r + 1} {w:4s}: plain {times[False] * 1e3:.3f} ms/step, "
                      f"hooked {times[True] * 1e3:.3f} ms/step, ratio {ratio:.3f}",
                      flush=True)
    for w in workloads:
        print(f"{w}: median ratio {statistics.median(ratios[w]):.3f} over {args.rounds} "
              f"rounds (min {min(ratios[w]):.3f}, max {max(ratios[w]):.3f})")
    every = [x for w in workloads for x in ratios[w]]
    print(f"step-time ratio with / without gpudiag's hooks (median): "
          f"{statistics.median(every):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
