"""Why is it slow, on user-like programs: what `gpudiag run` names for each, and its step
period against the program's own clock.

The programs are the tests' (tests/programs/): an input-bound Keras fit (an expensive
map, no parallelism), the same with AUTOTUNE, cache and prefetch, a custom loop with
Python between the steps, a balanced fit, and a MirroredStrategy loop over two virtual
CPU devices with a large dense layer and a small batch. Each runs plain, under
`gpudiag run`, and plain again, in one invocation (interleaved). Each program prints the
period of every step by its own clock; gpudiag's median period is set against the
program's median over the same steps (after the warm-up, the profiled steps and the ones
before and after them left out). Printed per program: the bottleneck finding's classification and
breakdown, the plain-vs-plain spread of the program's own median (the machine's noise),
and the ratios gpudiag / own clock of the mean and (last) the median period; the final
line is the median over the programs of the median ratio.

    python benchmarks/why_slow.py [--programs input,tuned,loop,balanced,mirrored]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "tests" / "programs"
CASES: dict[str, tuple[str, list[str], list[str]]] = {  # script, its args, gpudiag's options
    "input": ("input_pipeline_fit.py", [], ["--profile-warmup", "60"]),
    "tuned": ("input_pipeline_fit.py", ["tuned"], ["--profile-warmup", "60"]),
    "loop": ("custom_loop_python_between.py", [], []),
    "balanced": ("balanced_fit.py", [], []),
    "mirrored": ("mirrored_allreduce_heavy.py", [], []),
}


def own_periods(stdout: str) -> list[float | None]:
    if "own periods:" not in stdout:
        return []
    return list(json.loads(stdout.split("own periods:")[1].splitlines()[0]))


def chosen(periods: list[float | None], warmup: int, profiled: set[int]) -> list[float]:
    return [p for i, p in enumerate(periods) if p is not None and i >= warmup
            and not {i - 1, i, i + 1} & profiled]


def median_over(periods: list[float | None], warmup: int, profiled: set[int]) -> float | None:
    picked = chosen(periods, warmup, profiled)
    return statistics.median(picked) if picked else None


def plain(script: str, args: list[str]) -> list[float | None]:
    proc = subprocess.run([sys.executable, str(PROGRAMS / script), *args], capture_output=True,
                          text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    return own_periods(proc.stdout)


def hooked(script: str, args: list[str], options: list[str]) -> tuple[dict[str, Any], str]:
    with tempfile.TemporaryDirectory() as logdir:
        proc = subprocess.run(
            [sys.executable, "-m", "gpudiag", "run", "--logdir", logdir, *options, "--",
             sys.executable, str(PROGRAMS / script), *args], capture_output=True, text=True,
            timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
        (report,) = Path(logdir).glob("*/report.json")
        return json.loads(report.read_text()), proc.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", default=",".join(CASES))
    names = parser.parse_args().programs.split(",")
    ratios = []
    for name in names:
        script, args, options = CASES[name]
        warmup = int(options[1]) if options else 10
        before = plain(script, args)
        report, stdout = hooked(script, args, options)
        after = plain(script, args)
        found = {f["id"]: f for f in report["findings"]}
        bottleneck, throughput = found["run.bottleneck"], found["run.throughput"]
        profiled = set(found["run.profile"]["evidence"]["profile"]["steps"])
        (loop,) = throughput["evidence"]["loops"]
        own = median_over(own_periods(stdout), warmup, profiled)
        a, b = median_over(before, warmup, set()), median_over(after, warmup, set())
        if own is None or a is None or b is None:
            print(f"{name}: a program printed no periods")
            continue
        spread = abs(a - b) / min(a, b)
        ratio = loop["step_s_median"] / own
        mean_ratio = loop["step_s_mean"] / statistics.fmean(
            chosen(own_periods(stdout), warmup, profiled))
        ratios.append(ratio)
        causes = bottleneck["evidence"].get("causes") or []
        shares = bottleneck["evidence"].get("shares") or {}
        print(f"{name}: {bottleneck['status']} {', '.join(causes) or 'no bottleneck'}; "
              + ", ".join(f"{k} {v:.0%}" for k, v in shares.items()))
        print(f"{name}: gpudiag {loop['step_s_median'] * 1e3:.3f} ms/step, own clock "
              f"{own * 1e3:.3f} ms/step (plain runs {a * 1e3:.3f} and {b * 1e3:.3f}, spread "
              f"{spread:.1%}); mean ratio {mean_ratio:.3f}; median ratio {ratio:.3f}")
    if ratios:
        print(f"step period gpudiag / program's own clock (median over {len(ratios)} "
              f"programs): {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
