"""How close gpudiag's what-if predictions come: pairs of programs, slow then fixed, as
TensorFlow's performance guides write them, each run under `gpudiag run`.

For each pair: the slow and the fixed program's median step (95 % interval, from each
run's step series read with gpudiag.rundir), run alternately for --rounds rounds; the
prediction the slow run's bottleneck finding made (evidence.predicted, scaled to the
slow run's median step as `gpudiag diff` does); its error against the fixed run's
measured median; last the median absolute error over the pairs.

    PYTHONPATH=. python benchmarks/whatif.py [--rounds 1]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _stats import median_ci

from gpudiag.rundir import Run, list_runs

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = str(HERE / "_whatif_workload.py")
INPUT = str(REPO / "tests" / "programs" / "input_pipeline_fit.py")
# name, slow argv, fixed argv, gpudiag run options
PAIRS = [
    ("slow map -> parallel map + cache + prefetch", [INPUT], [INPUT, "tuned"],
     ["--profile-warmup", "60"]),
    ("steps_per_execution 1 -> 16", [WORK, "spe", "1"], [WORK, "spe", "16"], []),
    ("eager step -> tf.function", [WORK, "eager"], [WORK, "graph"], []),
]


def run(logdir: Path, argv: list[str], options: list[str]) -> Run:
    subprocess.run([sys.executable, "-m", "gpudiag", "run", *options, "--logdir",
                    str(logdir), "--", sys.executable, *argv], check=False,
                   capture_output=True, cwd=REPO, timeout=600)
    return list_runs(logdir)[0]


def steps(r: Run) -> list[float]:
    longest = max(r.loops.values(), key=lambda lp: len(lp.steps), default=None)
    if longest is None:
        return []
    t = longest.step_times()
    return t[10:] if len(t) >= 30 else t


def text(values: list[float]) -> str:
    ci = median_ci(values)
    where = f"{ci[0] * 1e3:.3f}-{ci[1] * 1e3:.3f}" if ci else "no CI"
    return f"{statistics.median(values) * 1e3:.3f} ms ({where})"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    errors = []
    print("| pair | slow | fixed | cause | predicted | error |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, slow_argv, fixed_argv, options in PAIRS:
            slow: list[float] = []
            fixed: list[float] = []
            predictions = []
            for i in range(args.rounds):
                s = run(Path(tmp) / f"{i}-slow-{len(errors)}", slow_argv, options)
                f = run(Path(tmp) / f"{i}-fixed-{len(errors)}", fixed_argv, options)
                slow += steps(s)
                fixed += steps(f)
                b = next((b for b in s.breakdown if b.step_s), None)
                p = (b.predicted or {}) if b else {}
                if b and p.get("step_s") and steps(s):
                    predictions.append((p.get("cause"), statistics.median(steps(s)) *
                                        p["step_s"] / (b.step_s or 1)))
                elif b:
                    predictions.append((p.get("cause") or ", ".join(b.causes), None))
            cause, pred = predictions[0] if predictions else (None, None)
            if pred and fixed:
                error = statistics.median(fixed) / pred - 1
                errors.append(abs(error))
                shown = f"{pred * 1e3:.3f} ms", f"{error:+.0%}"
            else:
                shown = "none", "-"
            print(f"| {name} | {text(slow) if slow else '-'} | {text(fixed) if fixed else '-'}"
                  f" | {cause or 'no bottleneck'} | {shown[0]} | {shown[1]} |", flush=True)
    print(f"median absolute error over {len(errors)} predicted pair(s): "
          + (f"{statistics.median(errors):.0%}" if errors else "none"))


if __name__ == "__main__":
    main()
