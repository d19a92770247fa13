"""How long until the first answer: `gpudiag scaling --max-gpus 4` (and the demo's diagnosis).

Issue 30's benchmark (not a timed test). Each round, side by side: one
``python -c "import tensorflow"`` (the floor this machine sets: every child pays it),
`gpudiag scaling --max-gpus 4` with its default settings into a fresh logdir, and, when
``scripts/demo.py`` and the demo's virtual environment (``.venv``, made by `make demo`)
exist, the demo's diagnosis (``scripts/demo.py``). Prints each round's seconds per phase
from report.json's ``data.scaling.timing`` (gpudiag.scaling.timing: summed over the
children and strategies, the parent's beside them) and the totals, then the medians,
and last the demo's and scaling's median totals as multiples of the median import time.

    python benchmarks/first_answer.py [--rounds 3] [--no-demo]

Run it from the repository (it imports this checkout's gpudiag); say how loaded the
machine was (`uptime` before and after): the 2 cores are often shared.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from gpudiag.scaling.timing import PHASES, phase_totals  # noqa: E402

SCALING = ["scaling", "--max-gpus", "4"]
DEMO_PYTHON = REPO / ".venv" / "bin" / "python"


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int]:
    """Wall seconds and exit code of ``cmd`` (its output thrown away)."""
    start = time.perf_counter()
    code = subprocess.call(cmd, env=env, cwd=REPO, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, code


def scaling_round(env: dict[str, str]) -> tuple[float, dict[str, float]]:
    """One `gpudiag scaling --max-gpus 4`: its wall time and phases (report.json)."""
    with tempfile.TemporaryDirectory(prefix="gpudiag-first-answer-") as tmp:
        wall, code = timed([sys.executable, "-m", "gpudiag", *SCALING, "--logdir", tmp], env)
        if code >= 2:
            raise SystemExit(f"gpudiag scaling exited {code}")
        (report,) = Path(tmp).glob("*/report.json")
        data = json.loads(report.read_text())["data"]["scaling"]
        return wall, phase_totals(data["timing"])


def demo_round(env: dict[str, str]) -> float | None:
    """One demo diagnosis with the demo's venv (None: no demo or no venv here)."""
    if not (REPO / "scripts" / "demo.py").exists() or not DEMO_PYTHON.exists():
        return None
    with tempfile.TemporaryDirectory(prefix="gpudiag-first-answer-demo-") as tmp:
        wall, code = timed([str(DEMO_PYTHON), "scripts/demo.py", "--logdir", tmp], env)
        if code >= 2:
            raise SystemExit(f"scripts/demo.py exited {code}")
        return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-demo", action="store_true")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    imports, walls, demos = [], [], []
    phases: list[dict[str, float]] = []
    for i in range(args.rounds):
        imports.append(timed([sys.executable, "-c", "import tensorflow"], env)[0])
        wall, totals = scaling_round(env)
        walls.append(wall)
        phases.append(totals)
        demo = None if args.no_demo else demo_round(env)
        if demo is not None:
            demos.append(demo)
        print(f"round {i + 1}: import tensorflow {imports[-1]:.1f} s, scaling {wall:.1f} s"
              + (f", demo {demo:.1f} s" if demo is not None else ""), flush=True)
    print(f"\n{'phase (s, summed over children)':34}"
          + "".join(f"{f'round {i + 1}':>10}" for i in range(args.rounds)) + f"{'median':>10}")
    for key in (*PHASES, "total_s"):
        values = [p[key] for p in phases]
        print(f"{key:34}" + "".join(f"{v:10.1f}" for v in values)
              + f"{statistics.median(values):10.1f}")
    print(f"{'scaling wall (measured here)':34}" + "".join(f"{v:10.1f}" for v in walls)
          + f"{statistics.median(walls):10.1f}")
    print(f"{'import tensorflow (floor)':34}" + "".join(f"{v:10.1f}" for v in imports)
          + f"{statistics.median(imports):10.1f}")
    floor = statistics.median(imports)
    if demos:
        print(f"demo diagnosis median {statistics.median(demos):.1f} s = "
              f"{statistics.median(demos) / floor:.1f} x import tensorflow")
    else:
        print("demo diagnosis: not run (--no-demo, or no scripts/demo.py or .venv here)")
    print(f"scaling median {statistics.median(walls):.1f} s = "
          f"{statistics.median(walls) / floor:.1f} x import tensorflow")
    return 0


if __name__ == "__main__":
    sys.exit(main())
