"""What `gpudiag run`'s hooks cost the user's program outside the profiled window.

The same user-like program (benchmarks/_run_workload.py: a Keras ``Model.fit`` and a
custom loop with a tf.function step, each a 784-256-10 MLP at batch 128 on generated
data) runs as a plain ``python`` process and under ``gpudiag run`` (all hooks on: the
placement log, tf.config/strategy/Session wrappers, the timed step function or fit
callback, the stream filter in the parent, NVML sampling where there is NVML). The
program times its own steps after its warm-up, which holds gpudiag's profiler window, so
the timed steps are outside it; it reports its fastest block of 50 steps (a shared
machine's other jobs slow some blocks at random). Hooked and plain runs alternate, round
after round, the order flipping each round, in one invocation. The last line is the
median per-round ratio of step time hooked / plain over both workloads: the target is
<= 1.02.

    python benchmarks/run_overhead.py [--rounds 5] [--steps 1000] [--workloads fit,loop]
        [--gpudiag-args=--no-placement-log]
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


def value(output: str, key: str) -> float:
    lines = [ln for ln in output.splitlines() if ln.startswith(f"{key} ")]
    if not lines:
        raise RuntimeError(f"the workload printed no {key} line:\n{output[-2000:]}")
    return float(lines[-1].split()[1])


def run_once(workload: str, steps: int, hooked: bool, logdir: str,
             extra: list[str] | None = None) -> tuple[float, float]:
    program = [sys.executable, str(WORKLOAD), workload, "--steps", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if hooked:
        cmd = [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, *(extra or []),
               "--", *program]
    else:
        cmd = program
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode not in (0, 1):  # 1: a finding failed (no GPU here ...), not an error
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    return value(proc.stdout, "STEP_S"), value(proc.stdout, "CPU_S")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    parser.add_argument("--workloads", default="fit,loop")
    parser.add_argument("--gpudiag-args", default="", help="extra `gpudiag run` options, "
                        "e.g. --no-placement-log, to see what each part costs")
    args = parser.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    ratios: dict[str, list[float]] = {w: [] for w in workloads}
    cpu_ratios: dict[str, list[float]] = {w: [] for w in workloads}
    with tempfile.TemporaryDirectory(prefix="gpudiag-run-overhead-") as logdir:
        for r in range(args.rounds):
            for w in workloads:
                order = (True, False) if r % 2 == 0 else (False, True)
                times = {hooked: run_once(w, args.steps, hooked, logdir,
                                          args.gpudiag_args.split()) for hooked in order}
                ratio = times[True][0] / times[False][0]
                cpu_ratio = times[True][1] / times[False][1]
                ratios[w].append(ratio)
                cpu_ratios[w].append(cpu_ratio)
                print(f"round {r + 1} {w:4s}: plain {times[False][0] * 1e3:.3f} ms/step, "
                      f"hooked {times[True][0] * 1e3:.3f} ms/step, ratio {ratio:.3f} "
                      f"(program CPU time ratio {cpu_ratio:.3f})", flush=True)
    for w in workloads:
        print(f"{w}: median program CPU time ratio {statistics.median(cpu_ratios[w]):.3f}")
        print(f"{w}: median ratio {statistics.median(ratios[w]):.3f} over {args.rounds} "
              f"rounds (min {min(ratios[w]):.3f}, max {max(ratios[w]):.3f})")
    every = [x for w in workloads for x in ratios[w]]
    print(f"step-time ratio with / without gpudiag's hooks (median): "
          f"{statistics.median(every):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
