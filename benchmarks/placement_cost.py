"""What gathering placement costs an eager-heavy program: TensorFlow's placement log
(what `gpudiag run` asked for before) against its run metadata left on (the worst case of
gpudiag's placement window: one that never closes), against nothing.

    python benchmarks/placement_cost.py [--rounds 5] [--steps 2000]

Each round runs the eager workload of benchmarks/_run_workload.py four times, in a
rotating order: plain, plain again, with run metadata on from the start
(``context.enable_run_metadata()``), and with ``tf.debugging.set_log_device_placement
(True)`` at ``TF_CPP_MIN_LOG_LEVEL=0``, its stderr read through a pipe as gpudiag's parent
reads it. Each ratio is against the mean of the two plain runs of its round, printed
beside the plain runs' own ratio; the median ratios come last.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = HERE / "_run_workload.py"
PRELUDE = {
    "plain": "",
    "plain2": "",
    "run_metadata": "from tensorflow.python.eager import context; "
                    "context.enable_run_metadata()",
    "placement_log": "tf.debugging.set_log_device_placement(True)",
}


def run_once(kind: str, steps: int) -> float:
    code = ("import sys, runpy, tensorflow as tf; " + (PRELUDE[kind] + "; " if PRELUDE[kind]
                                                        else "")
            + f"sys.argv = [{str(WORKLOAD)!r}, 'eager', '--steps', '{steps}']; "
            f"runpy.run_path({str(WORKLOAD)!r}, run_name='__main__')")
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "0"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} exited {proc.returncode}:\n{proc.stderr[-2000:]}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("STEP_S ")][-1]
    return float(line.split()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    kinds = list(PRELUDE)
    ratios: dict[str, list[float]] = {"run_metadata": [], "placement_log": []}
    spreads: list[float] = []
    for r in range(args.rounds):
        order = kinds[r % len(kinds):] + kinds[:r % len(kinds)]
        times = {k: run_once(k, args.steps) for k in order}
        plain = (times["plain"] + times["plain2"]) / 2
        spreads.append(times["plain2"] / times["plain"])
        for k in ratios:
            ratios[k].append(times[k] / plain)
        print(f"round {r + 1}: plain {times['plain'] * 1e3:.3f} and {times['plain2'] * 1e3:.3f}"
              f" ms/step, run metadata {times['run_metadata'] * 1e3:.3f}, placement log "
              f"{times['placement_log'] * 1e3:.3f} (plain/plain {spreads[-1]:.3f})", flush=True)
    spread = max(abs(x - 1) for x in spreads)
    for k, values in ratios.items():
        print(f"{k}: median step-time ratio {statistics.median(values):.3f} over "
              f"{args.rounds} rounds (plain against plain: median "
              f"{statistics.median(spreads):.3f}, spread +-{spread:.3f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
