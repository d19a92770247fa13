"""Does the fix gpudiag advises help, and the one it does not advise not help? (the twins
of tests/e2e/test_input_advice_e2e.py, moved here from the suite: a speed ratio is no test
assertion, load moves it)

Each program's ``--twins`` mode fits one epoch of each variant in turn, in one process,
3 rounds, so a shared machine's load falls on all alike, and prints each variant's median
ms a step. This script runs that ``--runs`` times and, per program, prints each variant
against the program as written (the ``plain`` side): the ratio of the medians with its
95 % interval over the runs, beside the spread of plain against plain (each run's plain
against the median plain: what the ratio must clear to show anything), the ratio last.

- tests/programs/xla_custom_loop.py: keras-io's XLA custom loop. gpudiag advises 16 steps
  a call (``steps16``: faster) and not prefetch (``prefetch``: no faster).
- tests/programs/pydataset_fit.py: a Keras PyDataset making batches in Python. gpudiag
  advises tf.data ops (``tf_data``: faster), not thread workers (``threads4``: no faster).

    PYTHONPATH=. python benchmarks/advice_twins.py [--runs 5]
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
from pathlib import Path

from _stats import ratio_ci

PROGRAMS = Path(__file__).resolve().parent.parent / "tests" / "programs"
#: program -> (the variant as written, the advised fix, the fix gpudiag does not advise)
TWINS = {"xla_custom_loop.py": ("plain", "steps16", "prefetch"),
         "pydataset_fit.py": ("pydataset", "tf_data", "threads4")}


def one_run(program: str, names: tuple[str, ...]) -> dict[str, float]:
    proc = subprocess.run([sys.executable, str(PROGRAMS / program), "--twins"],
                          capture_output=True, text=True, timeout=600, check=True)
    found = dict(re.findall(rf"({'|'.join(names)}) ([0-9.]+)", proc.stdout))
    return {name: float(found[name]) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    for program, names in TWINS.items():
        runs = [one_run(program, names) for _ in range(args.runs)]
        plain = [r[names[0]] for r in runs]
        mid = statistics.median(plain)
        spread = max(abs(p / mid - 1) for p in plain)
        print(f"{program}: {args.runs} runs, {names[0]} {mid:.3f} ms a step "
              f"(plain against plain +-{spread:.3f})")
        for name, advised in ((names[1], "advised"), (names[2], "not advised")):
            fixed = [r[name] for r in runs]
            ci = ratio_ci(plain, fixed)
            where = f"95 % CI {ci[0]:.3f}-{ci[1]:.3f}" if ci else "no CI from so few runs"
            ratio = statistics.median(fixed) / mid
            print(f"  {name} ({advised}): {statistics.median(fixed):.3f} ms, {where}, "
                  f"spread +-{spread:.3f}, ratio {ratio:.3f}")


if __name__ == "__main__":
    main()
