"""How close gpudiag's what-if predictions come: pairs of programs, slow then fixed, as
TensorFlow's performance guides write them, each run under `gpudiag run`.

Each pair's fixed program is exactly the fix the slow run's bottleneck finding advises:
the benchmark reads the slow run's ``evidence.predicted.fix`` and refuses to count a pair
whose fixed program is another fix (the N of steps_per_execution and the batch factor are
taken from the prediction). Both sides run interleaved, --rounds rounds, the order
alternating (slow first in even rounds, fixed first in odd ones), so that the machine's
load falls on both alike. For each pair: the slow and the fixed run's median step (per
training step, all rounds' steady-state steps pooled) with its distribution-free 95 %
interval (gpudiag.verdicts.stats.median_ci); the prediction from the slow run (its
``predicted.step_s`` scaled to that round's measured median as `gpudiag diff` does: the
profiled window is slower than the rest; the median over the rounds); its error against
the fixed run's measured median; its coverage: in how many rounds the fixed run's
median step fell inside the interval predicted from the same round's slow run
(``predicted.step_s_low`` / ``step_s_high``, scaled alike); last the median absolute error
over the pairs with a prediction, and the coverage over every round of them (aimed at: 90 %,
with intervals no wider than they must be). An eager loop has no step function gpudiag
times: its sides are measured by the program's own clock (it prints its step periods).

    PYTHONPATH=. python benchmarks/whatif.py [--rounds 3] [--pairs map,gen,...]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpudiag.commands.diff import steady_rules
from gpudiag.rundir import Run, list_runs
from gpudiag.verdicts.diff_steptime import steady_times
from gpudiag.verdicts.stats import median_ci

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORK = [sys.executable, str(HERE / "_whatif_workload.py")]
MIRRORED_BATCH = 4


@dataclass
class Pair:
    key: str
    name: str
    slow: list[str]
    fixed: Callable[[dict[str, Any]], list[str]]  # from the slow run's prediction
    fix: tuple[str, ...]  # what the prediction's fix must name (the advised fix)
    options: list[str] = field(default_factory=list)


PAIRS = [
    Pair("map", "slow map -> parallel map + prefetch", [*WORK, "map", "slow"],
         lambda p: [*WORK, "map", "fixed"], ("parallel map", "prefetch"),
         ["--profile-warmup", "60"]),
    Pair("gen", "generator -> vectorised from_tensor_slices + prefetch",
         [*WORK, "gen", "slow"], lambda p: [*WORK, "gen", "fixed"],
         ("instead of the generator", "prefetch")),
    Pair("spe", "steps_per_execution 1 -> N", [*WORK, "spe", "1"],
         lambda p: [*WORK, "spe", str(p["inputs"]["steps_per_execution"])],
         ("steps_per_execution=",)),
    Pair("eager", "eager step -> tf.function", [*WORK, "eager"],
         lambda p: [*WORK, "graph"], ("tf.function",)),
    Pair("mirrored", f"MirroredStrategy batch {MIRRORED_BATCH} -> larger batch",
         [*WORK, "mirrored", str(MIRRORED_BATCH)],
         lambda p: [*WORK, "mirrored", str(MIRRORED_BATCH * p["inputs"]["batch_factor"])],
         ("batch per replica",)),
]


def run(logdir: Path, argv: list[str], options: list[str]) -> Run:
    subprocess.run([sys.executable, "-m", "gpudiag", "run", *options, "--logdir",
                    str(logdir), "--", *argv], check=False, capture_output=True, cwd=REPO,
                   timeout=900)
    return list_runs(logdir)[0]


def steps(r: Run) -> list[float]:
    """Seconds per training step: the longest loop's steady steps (run.throughput's rule,
    as `gpudiag diff` takes them), else the program's own
    clock ("own periods:" on its stdout, the first ten left out)."""
    longest = max(r.loops.values(), key=lambda lp: len(lp.steps), default=None)
    if longest is not None and longest.step_times():
        return steady_times(longest, steady_rules(r).get(longest.name))
    for child in r.children.values():
        if child.stdout is None:
            continue
        for line in child.stdout.read_text().splitlines():
            if line.startswith("own periods:"):
                return [float(v) for v in json.loads(line.split(":", 1)[1])[10:] if v]
    return []


Interval = tuple[float, float] | None


def prediction(r: Run) -> tuple[dict[str, Any] | None, float | None, str, Interval]:
    """The slow run's bottleneck prediction, its step scaled to the run's measured median,
    what to print when there is none, and the prediction's interval scaled alike."""
    b = next((b for b in r.breakdown if b.step_s), None)
    if b is None:
        f = r.finding("run.bottleneck")
        return None, None, f"no bottleneck finding ({(f or {}).get('message', '')[:90]})", \
            None
    p = b.predicted or {}
    measured = steps(r)
    if not p.get("step_s") or not measured:
        return p, None, f"{p.get('cause') or b.bottleneck}: {p.get('why', 'no number')[:90]}", \
            None
    # from the step the prediction was made from (a fit's run step where its window missed
    # the input wait, else the profiled one) to the run's median, as `gpudiag diff` does
    scale = statistics.median(measured) / ((p.get("inputs") or {}).get("period_s")
                                           or b.step_s or 1)
    low, high = p.get("step_s_low"), p.get("step_s_high")
    interval = (float(low) * scale, float(high) * scale) if low is not None and \
        high is not None else None
    return p, scale * float(p["step_s"]), "", interval


def text(values: list[float]) -> str:
    if not values:
        return "-"
    ci = median_ci(values)
    where = f"{ci[0] * 1e3:.3f}-{ci[1] * 1e3:.3f}" if ci else "no CI"
    return f"{statistics.median(values) * 1e3:.3f} ms ({where}, n={len(values)})"


def measure(pair: Pair, rounds: int, tmp: Path) -> str:
    slow: list[float] = []
    fixed: list[float] = []
    predicted: list[float] = []
    intervals: dict[int, Interval] = {}  # round -> the slow run's predicted interval
    fixed_medians: dict[int, float] = {}  # round -> the fixed run's median step
    said, advised = "", None
    for i in range(rounds):  # round 0 runs slow first: its advice names the fixed program
        for side in ("slow", "fixed") if i % 2 == 0 else ("fixed", "slow"):
            if side == "slow":
                s = run(tmp / f"{pair.key}-{i}-slow", pair.slow, pair.options)
                slow += steps(s)
                p, value, why, interval = prediction(s)
                advised, said = advised or p, said or why
                predicted += [value] if value is not None else []
                intervals[i] = interval
            else:
                argv = pair.fixed(advised) if advised and advised.get("step_s") else \
                    pair.fixed({"inputs": {"steps_per_execution": 16, "batch_factor": 2}})
                these = steps(run(tmp / f"{pair.key}-{i}-fixed", argv, pair.options))
                fixed += these
                if these:
                    fixed_medians[i] = statistics.median(these)
    fix = (advised or {}).get("fix")
    if fix and not all(k in fix for k in pair.fix):
        said, predicted = f"advised {fix!r}: the fixed program is another fix", []
    cause = (advised or {}).get("cause") or "-"
    if predicted and fixed:
        pred = statistics.median(predicted)
        error = statistics.median(fixed) / pred - 1
        ERRORS.append(abs(error))
        shown = f"{pred * 1e3:.3f} ms ({fix})", f"{error:+.0%}", coverage(intervals,
                                                                          fixed_medians)
    else:
        shown = f"none: {said}", "-", "-"
    return (f"| {pair.name} | {text(slow)} | {text(fixed)} | {cause} | {shown[0]} | "
            f"{shown[1]} | {shown[2]} |")


def coverage(intervals: dict[int, Interval], fixed: dict[int, float]) -> str:
    """``2/3 inside (1.62-2.31 ms, ...)``: the rounds whose fixed median fell inside the
    interval its slow run predicted; counted into COVERED."""
    known = {i: span for i, span in intervals.items() if span is not None and i in fixed}
    inside = [i for i, (low, high) in known.items() if low <= fixed[i] <= high]
    COVERED.extend(i in inside for i in known)
    spans = ", ".join(f"{low * 1e3:.3f}-{high * 1e3:.3f}" for low, high in known.values())
    rounds = list(known)
    return f"{len(inside)}/{len(rounds)} inside ({spans} ms)" if rounds else "no interval"


ERRORS: list[float] = []
COVERED: list[bool] = []  # per round of a predicted pair: the fixed median inside


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--pairs", default=",".join(p.key for p in PAIRS))
    args = parser.parse_args()
    keys = args.pairs.split(",")
    print("| pair | slow (median, 95 % CI) | fixed (median, 95 % CI) | cause | predicted "
          "(fix) | error | coverage |")
    print("|---|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        for pair in PAIRS:
            if pair.key in keys:
                print(measure(pair, args.rounds, Path(tmp)), flush=True)
    print(f"median absolute error over {len(ERRORS)} predicted pair(s): "
          + (f"{statistics.median(ERRORS):.0%}" if ERRORS else "none")
          + f"; coverage: {sum(COVERED)}/{len(COVERED)} round(s) inside the predicted "
          "interval" + (f" ({sum(COVERED) / len(COVERED):.0%})" if COVERED else ""))


if __name__ == "__main__":
    main()
