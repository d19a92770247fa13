"""What `gpudiag run`'s hooks cost a step inside the program, measured in one process.

run_overhead.py compares whole processes, plain and under `gpudiag run`; on this machine
two plain processes of the same tf.function or fit program differ by up to 10 % (runs
fall into a fast and a slow mode), more than the 2 % it judges. This script removes that
noise: under `gpudiag run`, one program (benchmarks/_hook_cost_workload.py) times blocks of
the same compiled step through gpudiag's hook and through TensorFlow's own entry point
behind it (``__gpudiag_wrapped__``), interleaved, the order rotating, in the same process
and memory. Two blocks of each round go through TensorFlow's own entry point: their ratio
is the noise floor, printed beside each ratio. Workloads: ``loop`` (a tf.function step
called from a Python loop), ``session`` (Session.run per step), ``fit`` (Model.fit, one
call a block). An eager program has no gpudiag code on its path outside the placement
windows: run_overhead.py's ``eager`` workload measures it whole.

What this does not count: gpudiag's own process (the stream pumps, the live thread, NVML
sampling) runs on other cores of a multi-core host; run_overhead.py counts it.

    python benchmarks/hook_cost.py [--rounds 30] [--block 100] [--workloads loop,session,fit]
        [--cpu 1]

``--cpu N``: the program on core N alone (taskset) with one TensorFlow thread per pool,
gpudiag's process on the other cores. The last lines are the median per-round ratio of
the hooked step time to the mean of the two plain blocks, per workload (target <= 1.02),
with its 95 % confidence interval (benchmarks/_stats.py: distribution-free, it narrows
with more rounds), each beside the plain-against-plain ratio of the same rounds, its
quartiles (the spread of one round) and its own interval (what "no difference" looks
like here).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _stats import describe

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKLOAD = HERE / "_hook_cost_workload.py"


def rounds_of(workload: str, rounds: int, block: int, logdir: str, cpu: int | None
              ) -> list[tuple[float, float, float]]:
    program = [sys.executable, str(WORKLOAD), workload, "--rounds", str(rounds),
               "--block", str(block)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if cpu is not None:
        program = ["taskset", "-c", str(cpu), *program]
        env.update(TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    cmd = [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, "--", *program]
    others = sorted(os.sched_getaffinity(0) - {cpu}) if cpu is not None else []
    if others:
        cmd = ["taskset", "-c", ",".join(map(str, others)), *cmd]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1800)
    lines = [ln.split()[1:] for ln in proc.stdout.splitlines() if ln.startswith("ROUND ")]
    if len(lines) != rounds:
        raise RuntimeError(f"{' '.join(cmd)} exited {proc.returncode} after {len(lines)} "
                           f"rounds:\n{proc.stdout[-1500:]}\n{proc.stderr[-1500:]}")
    return [(float(h), float(p), float(p2)) for h, p, p2 in lines]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--workloads", default="loop,session,fit")
    parser.add_argument("--cpu", type=int, default=None)
    args = parser.parse_args()
    results = {}
    with tempfile.TemporaryDirectory(prefix="gpudiag-hook-cost-") as logdir:
        for w in [w.strip() for w in args.workloads.split(",") if w.strip()]:
            rows = rounds_of(w, args.rounds, args.block, logdir, args.cpu)
            ratios = [h / ((p + p2) / 2) for h, p, p2 in rows]
            spreads = [p2 / p for _, p, p2 in rows]
            cost_us = [(h - (p + p2) / 2) * 1e6 for h, p, p2 in rows]
            plain_ms = statistics.median((p + p2) / 2 for _, p, p2 in rows) * 1e3
            print(f"{w}: {len(rows)} rounds of {args.block} steps, plain "
                  f"{plain_ms:.3f} ms/step; the hook's cost per step: "
                  f"{describe(cost_us).replace('median', 'median (us)')}", flush=True)
            results[w] = (ratios, spreads)
    for w, (ratios, spreads) in results.items():
        rq, sq = statistics.quantiles(ratios, n=4), statistics.quantiles(spreads, n=4)
        print(f"{w}: step-time ratio {describe(ratios)}, quartiles {rq[0]:.3f}-{rq[2]:.3f}; "
              f"plain against plain in the same rounds: {describe(spreads)}, quartiles "
              f"{sq[0]:.3f}-{sq[2]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
