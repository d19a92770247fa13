"""Does `gpudiag try` measure what the fix gives, and how close came the prediction?
(issue 45, item 7: docs/accuracy.md is this script's output)

For each program of benchmarks/_accuracy_workload.py (written the way users write them,
each with its fix edited in by hand behind ``fixed``):

1. ``gpudiag try --fix FIX --rounds R --steps S -- python _accuracy_workload.py PROGRAM``:
   its measured B/A for the fix with its interval (run-to-run, over the rounds), the
   prediction as B/A with its interval, and whether the measurement fell inside it, read
   from the try run's report.json through gpudiag's reader (load_run, TriedFix).
2. The hand-fixed twin, timed plainly (no gpudiag): the program as written (A) and with the
   fix edited in (B), interleaved in one run, ``--pairs`` pairs, the order alternating,
   each run's own clock (its median step after its first 10). Printed: A's median, the
   spread of plain against plain (each A against A's median: what B must clear), each
   pair's B/A with the interval of their geometric mean (Student's t on the logarithms, as
   `gpudiag try` makes its own), the ratio of the medians last.

Per program: whether try and the twin agree (B/A within 15 % of each other, or both say
"no change": each interval holds 1.00), the prediction's error (measured / predicted - 1,
try's measurement) and whether the measurement fell inside the predicted interval.
``compute`` runs with a busy process on each core (for its runs only: try's and the
twin's). The machine's load average is read before and after each program.

    PYTHONPATH=. python benchmarks/try_accuracy.py [--rounds 3] [--steps 40] [--pairs 3]
        [--programs wait,compute,...] [--write docs/accuracy.md]
    PYTHONPATH=. python benchmarks/try_accuracy.py --from-doc docs/accuracy.md \
        --write docs/accuracy.md   (no runs: the page again from the measurements it holds)
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from _accuracy_doc import read_raw, write_doc

from gpudiag.layout import TRY_DIAGNOSIS, TRY_RUNS_DIR
from gpudiag.layout.compared import TriedFix
from gpudiag.rundir import list_runs, load_run
from gpudiag.verdicts.trial import ratio_interval

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
WORKLOAD = "_accuracy_workload.py"
AGREE = 0.15


@dataclass(frozen=True)
class Program:
    key: str
    name: str
    fix: str
    busy: bool = False
    steps: int | None = None  # try's --steps for this program (None: the benchmark's)


PROGRAMS = [
    # --steps 0: a trial stopped inside its epoch hung at exit, its numpy_function pending
    Program("wait", "slow map, its work waiting (a 2 ms read an example)", "parallel-map",
            steps=0),
    Program("compute", "slow map, its work compute, both cores busy", "parallel-map", True),
    Program("spe", "tiny model at steps_per_execution=1 (fixed: 16)", "steps-per-execution"),
    Program("retrace", "tf.function retracing on a new shape each call",
            "reduce-retracing"),
    Program("jit-fused", "fit for XLA to fuse (small element-wise ops, 16 steps a call)",
            "jit-compile"),
    Program("jit-matmul", "fit with little for XLA to fuse (one large matmul, 16 steps "
            "a call)", "jit-compile"),
]


@dataclass
class Outcome:
    program: Program
    tried: TriedFix | None = None
    not_tried: str = ""  # why try measured nothing for the fix
    predicted: dict[str, object] = field(default_factory=dict)  # the diagnosis's inputs
    plain: list[float] = field(default_factory=list)  # the twin's A, ms a step
    fixed: list[float] = field(default_factory=list)  # the twin's B
    load: tuple[float, float] = (0.0, 0.0)
    try_s: float = 0.0
    twin_s: float = 0.0

    def twin(self) -> tuple[float, float | None, float | None] | None:
        """The twin's ratio of medians, with the interval of its pairs' B/A."""
        if not self.plain or not self.fixed:
            return None
        pairs = [b / a for a, b in zip(self.plain, self.fixed, strict=False)]
        _, low, high = ratio_interval(pairs)
        return statistics.median(self.fixed) / statistics.median(self.plain), low, high

    def spread(self) -> float:
        mid = statistics.median(self.plain)
        return max(abs(p / mid - 1) for p in self.plain)

    def agree(self) -> str:
        twin = self.twin()
        t = self.tried
        if twin is None or t is None or t.ratio is None:
            return "-"
        no_change = [lo is not None and hi is not None and lo <= 1.0 <= hi
                     for lo, hi in ((t.ratio_low, t.ratio_high), twin[1:])]
        if all(no_change):
            return "yes: both intervals hold 1.00"
        off = t.ratio / twin[0] - 1
        return f"{'yes' if abs(off) <= AGREE else 'no'} ({off:+.0%})"

    def error(self) -> float | None:
        t = self.tried
        if t is None or t.ratio is None or not t.predicted_ratio:
            return None
        return t.ratio / t.predicted_ratio - 1


@contextlib.contextmanager
def busy_cores(on: bool) -> Iterator[None]:
    """A process spinning on each core while the block runs (``on``)."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"])
                for _ in range(os.cpu_count() or 1)] if on else []
    try:
        yield
    finally:
        for p in spinners:
            p.kill()
            p.wait()


def run_try(p: Program, logdir: Path, rounds: int, steps: int, out: Outcome) -> None:
    argv = [sys.executable, "-m", "gpudiag", "try", "--logdir", str(logdir), "--rounds",
            str(rounds), "--steps", str(steps), "--fix", p.fix, "--", sys.executable,
            WORKLOAD, p.key]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE, env=env,
                          timeout=1200, check=False)
    runs = [r for r in list_runs(logdir) if r.command == "try"]
    if not runs:
        out.not_tried = f"try wrote no run (exit {proc.returncode}): {proc.stderr[-200:]}"
        return
    run = runs[0]
    found = run.finding(f"try.fix.{p.fix}")
    if found is None:
        said = (run.finding("try.result") or {}).get("message") or proc.stderr[-200:]
        out.not_tried = f"not tried here: {said}"
    else:
        out.tried = TriedFix.from_dict(found.get("evidence"))
    diagnosis = load_run(run.path / TRY_RUNS_DIR / TRY_DIAGNOSIS)
    bottleneck = diagnosis.finding("run.bottleneck") or {}
    predicted = (bottleneck.get("evidence") or {}).get("predicted") or {}
    out.predicted = {"cause": predicted.get("cause"), "fix": predicted.get("fix"),
                     "why": predicted.get("why"), **(predicted.get("inputs") or {}),
                     "bottleneck": bottleneck.get("message", "")[:160]}


def own_ms(key: str, fixed: bool) -> float:
    argv = [sys.executable, WORKLOAD, key, *(["fixed"] if fixed else [])]
    proc = subprocess.run(argv, capture_output=True, text=True, cwd=HERE, timeout=900,
                          check=True)
    found = re.search(r"own step ms: ([0-9.]+)", proc.stdout)
    if found is None:
        raise SystemExit(f"{key}: no own step in its output: {proc.stdout[-300:]}")
    return float(found.group(1))


def measure(p: Program, rounds: int, steps: int, pairs: int, tmp: Path) -> Outcome:
    out = Outcome(p)
    before = os.getloadavg()[0]
    with busy_cores(p.busy):
        start = time.monotonic()
        run_try(p, tmp / p.key, rounds, steps if p.steps is None else p.steps, out)
        out.try_s = time.monotonic() - start
        start = time.monotonic()
        for i in range(pairs):
            for fixed in (False, True) if i % 2 == 0 else (True, False):
                (out.fixed if fixed else out.plain).append(own_ms(p.key, fixed))
        out.twin_s = time.monotonic() - start
    out.load = (before, os.getloadavg()[0])
    return out


def ratio_text(ratio: float | None, low: float | None, high: float | None) -> str:
    if ratio is None:
        return "-"
    span = f" ({low:.2f}-{high:.2f})" if low is not None and high is not None else ""
    return f"{ratio:.2f}{span}"


def short(text: str, most: int = 110) -> str:
    return text if len(text) <= most else text[:most].rsplit(" ", 1)[0] + " ..."


def row(o: Outcome) -> str:
    """One program's line of the table (markdown)."""
    t, twin = o.tried, o.twin()
    tried = (f"{ratio_text(t.ratio, t.ratio_low, t.ratio_high)} {t.verdict}, {t.rounds} "
             "rounds" if t is not None and t.ratio is not None else
             (t.verdict + (f": {t.broke}" if t.broke else "")) if t is not None else
             o.not_tried)
    twin_text = (f"A {statistics.median(o.plain):.3f} ms (plain against plain "
                 f"+-{o.spread():.0%}), B/A {ratio_text(*twin)}, {len(o.plain)} pairs"
                 if twin else "-")
    pred = ratio_text(t.predicted_ratio, t.predicted_low, t.predicted_high) \
        if t is not None and t.predicted_ratio else \
        f"none: {short(str(o.predicted.get('why') or o.predicted.get('bottleneck') or ''))}"
    error = o.error()
    inside = ("no interval" if t is not None and t.predicted_ratio else "-") \
        if t is None or t.inside is None else "inside" if t.inside else "outside"
    return (f"| {o.program.name} | `{o.program.fix}` | {tried} | {twin_text} | {o.agree()} "
            f"| {pred} | {'-' if error is None else f'{error:+.0%}'} | {inside} |")


HEADER = ("| program | fix | `gpudiag try` B/A (95 % CI) | hand-fixed twin, plain | agree | "
          "predicted B/A (interval) | prediction's error | measured in the interval |\n"
          "|---|---|---|---|---|---|---|---|")


def summary(outcomes: list[Outcome]) -> list[str]:
    errors = [abs(e) for o in outcomes if (e := o.error()) is not None]
    covered = [o.tried.inside for o in outcomes if o.tried and o.tried.inside is not None]
    said = [o.agree() for o in outcomes if o.agree() != "-"]
    within = sum(a.startswith("yes (") for a in said)
    neither = sum(a.startswith("yes: both") for a in said)
    return [f"try and the twin agree: {within + neither} of {len(said)} program(s) measured "
            f"both ways ({within} within 15 %, {neither} only as both intervals hold 1.00)",
            "prediction's median absolute error: "
            + (f"{statistics.median(errors):.0%} over {len(errors)} prediction(s)"
               if errors else "no prediction to score"),
            f"measurement inside the predicted interval: {sum(covered)} of {len(covered)}"]


def from_raw(d: dict[str, Any]) -> Outcome:
    tried = d.pop("tried")
    named = {p.key: p for p in PROGRAMS}  # the names as now written
    return Outcome(**{**d, "program": named.get(d["program"]["key"], Program(**d["program"])),
                      "tried": TriedFix(**tried) if tried else None,
                      "load": tuple(d["load"])})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--programs", default=",".join(p.key for p in PROGRAMS))
    parser.add_argument("--write", type=Path, help="write the table and its account here")
    parser.add_argument("--from-doc", type=Path, help="no runs: write --write again from "
                        "the measurements an earlier page holds")
    args = parser.parse_args()
    if args.from_doc:
        raw = read_raw(args.from_doc)
        meta, outcomes = raw[0], [from_raw(d) for d in raw[1:]]
    else:
        meta, outcomes = measure_all(args)
    lines = summary(outcomes)
    print("\n".join(lines))
    if args.write:
        write_doc(args.write, HEADER, [row(o) for o in outcomes], lines,
                  [f"{o.program.key} {o.load[0]:.2f} -> {o.load[1]:.2f}" for o in outcomes],
                  meta, [meta, *(asdict(o) for o in outcomes)])


def measure_all(args: argparse.Namespace) -> tuple[dict[str, Any], list[Outcome]]:
    keys = args.programs.split(",")
    start_load, started = os.getloadavg(), time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    outcomes = []
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for p in PROGRAMS:
            if p.key in keys:
                outcomes.append(measure(p, args.rounds, args.steps, args.pairs, Path(tmp)))
                o = outcomes[-1]
                print(row(o), flush=True)
                print(f"  load {o.load[0]:.2f} -> {o.load[1]:.2f}; try {o.try_s:.0f} s, "
                      f"twin {o.twin_s:.0f} s; twin A {o.plain} B {o.fixed} ms; diagnosis "
                      f"{o.predicted}", file=sys.stderr, flush=True)
    argv = " ".join(a for a in sys.argv[1:])
    return {"argv": argv, "started": started, "load_start": start_load,
            "load_end": os.getloadavg(), "cores": os.cpu_count()}, outcomes


if __name__ == "__main__":
    main()
