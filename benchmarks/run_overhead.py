"""What `gpudiag run`'s hooks cost the user's program outside the profiled window.

The same user-like program (benchmarks/_run_workload.py: a Keras ``Model.fit`` and a
custom loop with a tf.function step, each a 784-256-10 MLP at batch 128 on generated
data; the fit fed by a ``tf.py_function`` map, and by ``Dataset.from_generator``:
input-bound programs whose Python runs on tf.data's threads) runs as a plain ``python``
process and under ``gpudiag run`` (all hooks on: the placement log,
tf.config/strategy/Session wrappers, the timed step function or fit callback, the
stream filter in the parent, NVML sampling where there is NVML). The
program times its own steps after its warm-up, which holds gpudiag's profiler window, so
the timed steps are outside it; it reports its fastest block of 50 steps (a shared
machine's other jobs slow some blocks at random). Each round runs every workload three
times, plain, hooked, plain (hooked first every other round), in one invocation: the ratio
is hooked / the mean of the two plain runs, and the two plain runs' own ratio is printed
beside it (the machine's spread, measured in the same run). The last lines are the
median step-time ratio per workload (target <= 1.02), each with that spread.

    python benchmarks/run_overhead.py [--rounds 5] [--steps 1000]
        [--workloads fit,loop,eager,session,pyfunc,generator]
        [--gpudiag-args=--no-placement-log] [--cpu 1] [--hugepages]

With ``--cpu N`` the program, plain and hooked, runs alone on core N (``taskset``) with
one TensorFlow thread per pool, and gpudiag's own process on the other cores (as on any
multi-core training host): the run-to-run spread of the scheduler shrinks, and what the
hooks cost inside the program is all that separates the two sides.

With ``--hugepages`` both sides run with glibc's malloc asking for transparent huge pages
(``GLIBC_TUNABLES=glibc.malloc.hugetlb=1``). On this 2-core machine, two plain processes
of the tf.function loop pinned to one core fell into a fast (1.63-1.68 ms/step) and a slow
(1.75-1.85 ms) mode at random, 4 of 12; with huge pages, 1 of 12 (1.75). The step is a
784-256-10 MLP whose weights and activations fill the core's cache: where its pages lie
decides how well they share it, and huge pages make that the same for every process. The
ratios are printed with the 95 % confidence interval of their median
(benchmarks/_stats.py), beside the plain-against-plain ones.
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
WORKLOAD = HERE / "_run_workload.py"


def value(output: str, key: str) -> float:
    lines = [ln for ln in output.splitlines() if ln.startswith(f"{key} ")]
    if not lines:
        raise RuntimeError(f"the workload printed no {key} line:\n{output[-2000:]}")
    return float(lines[-1].split()[1])


def run_once(workload: str, steps: int, hooked: bool, logdir: str,
             extra: list[str] | None = None, cpu: int | None = None,
             hugepages: bool = False) -> tuple[float, float]:
    program = [sys.executable, str(WORKLOAD), workload, "--steps", str(steps)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if hugepages:  # both sides: where the program's pages lie no longer varies per process
        env["GLIBC_TUNABLES"] = "glibc.malloc.hugetlb=1"
    if cpu is not None:  # the program alone on one core, one TensorFlow thread per pool
        program = ["taskset", "-c", str(cpu), *program]
        env.update(TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    if hooked:
        cmd = [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, *(extra or []),
               "--", *program]
        others = sorted(os.sched_getaffinity(0) - {cpu}) if cpu is not None else []
        if others:  # gpudiag's own process on the other cores, as on any multi-core host
            cmd = ["taskset", "-c", ",".join(map(str, others)), *cmd]
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
    parser.add_argument("--workloads", default="fit,loop,eager,session,pyfunc,generator")
    parser.add_argument("--gpudiag-args", default="", help="extra `gpudiag run` options, "
                        "e.g. --no-placement-log, to see what each part costs")
    parser.add_argument("--cpu", type=int, default=None,
                        help="run the program (plain and hooked) alone on this core "
                        "(taskset) with one TensorFlow thread per pool, gpudiag's own "
                        "process on the other cores")
    parser.add_argument("--hugepages", action="store_true",
                        help="both sides with glibc's malloc on transparent huge pages")
    args = parser.parse_args()
    workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    ratios: dict[str, list[float]] = {w: [] for w in workloads}
    spreads: dict[str, list[float]] = {w: [] for w in workloads}
    cpu_ratios: dict[str, list[float]] = {w: [] for w in workloads}
    extra = args.gpudiag_args.split()
    with tempfile.TemporaryDirectory(prefix="gpudiag-run-overhead-") as logdir:
        for r in range(args.rounds):
            for w in workloads:
                # two plain runs around the hooked one (or the hooked one first, every
                # other round): their ratio is the machine's own spread in this run
                order = ("plain", "hooked", "plain2") if r % 2 == 0 else \
                    ("hooked", "plain", "plain2")
                times = {kind: run_once(w, args.steps, kind == "hooked", logdir, extra,
                                        args.cpu, args.hugepages)
                         for kind in order}
                plain = statistics.mean([times["plain"][0], times["plain2"][0]])
                plain_cpu = statistics.mean([times["plain"][1], times["plain2"][1]])
                ratio = times["hooked"][0] / plain
                spread = times["plain2"][0] / times["plain"][0]
                ratios[w].append(ratio)
                spreads[w].append(spread)
                cpu_ratios[w].append(times["hooked"][1] / plain_cpu)
                print(f"round {r + 1} {w:7s}: plain {times['plain'][0] * 1e3:.3f} and "
                      f"{times['plain2'][0] * 1e3:.3f} ms/step, hooked "
                      f"{times['hooked'][0] * 1e3:.3f} ms/step, ratio {ratio:.3f} "
                      f"(plain/plain {spread:.3f}; program CPU time ratio "
                      f"{cpu_ratios[w][-1]:.3f})", flush=True)
    for w in workloads:
        print(f"{w}: median program CPU time ratio {statistics.median(cpu_ratios[w]):.3f}")
    for w in workloads:
        spread = max(abs(x - 1) for x in spreads[w])
        print(f"{w}: step-time ratio {describe(ratios[w])} over {args.rounds} rounds (min "
              f"{min(ratios[w]):.3f}, max {max(ratios[w]):.3f}); plain against plain in the "
              f"same rounds: {describe(spreads[w])}, spread +-{spread:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
