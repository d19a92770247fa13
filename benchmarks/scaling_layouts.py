"""One scaling child per device count against one child per configuration: the efficiency
at 2 devices each layout gives, one run.

`gpudiag scaling` runs one child per device count (both strategies one after the other,
the all-reduce after them: gpudiag/probes/scaling.py); before issue 30 it ran one child
per configuration. Each round runs both layouts at 1 and 2 devices, side by side, order
rotating, so a shared machine's load drifts over both alike. Per strategy it prints each
round's efficiency in each layout, the spread of the old layout against itself (round to
round: the noise), and, last, the median ratio of the count layout's efficiency to the
configuration layout's: 1 means the layouts agree.

    python benchmarks/scaling_layouts.py [--rounds 3] [--steps 60]
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
from pathlib import Path

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from gpudiag import layout
from gpudiag.procs.runner import run_child
from gpudiag.records.training import (
    AllreduceConfig,
    CountConfig,
    CountResult,
    TrainingConfig,
    TrainingResult,
    Workload,
)
from gpudiag.verdicts.scaling import ThroughputPoint, scaling_rows

STRATEGIES = ["towers", "mirrored"]
Results = dict[tuple[str, int], TrainingResult]


def count_layout(root: Path, workload: Workload) -> Results:
    """One child per device count, as `gpudiag scaling` runs them."""
    out: Results = {}
    for n in (1, 2):
        config = CountConfig(n, STRATEGIES,
                             [str(root / layout.config_run_name(s, n)) for s in STRATEGIES],
                             workload=workload, check_max=n == 1, max_devices=2,
                             allreduce=AllreduceConfig(sizes_bytes=[1 << 20, 2 << 20]))
        child = run_child("scaling", config, run_dir=root, name=layout.count_child_name(n),
                          timeout_s=300)
        if not (child.ok and child.result):
            raise SystemExit(f"count child {n}: {child.error}")
        for o in CountResult.from_dict(child.result).outcomes:
            if o.result is None:
                raise SystemExit(f"{o.strategy}-{n}: {o.error}")
            out[(o.strategy, n)] = o.result
    return out


def config_layout(root: Path, workload: Workload) -> Results:
    """One child per configuration, the layout before issue 30."""
    out: Results = {}
    for n, strategy in itertools.product((1, 2), STRATEGIES):
        name = layout.config_run_name(strategy, n)
        child = run_child("training", TrainingConfig(strategy, n, str(root / name),
                                                     workload=workload),
                          run_dir=root, name=name, timeout_s=300)
        if not (child.ok and child.result):
            raise SystemExit(f"{name}: {child.error}")
        out[(strategy, n)] = TrainingResult.from_dict(child.result)
    return out


def efficiencies(results: Results) -> dict[str, float | None]:
    """Each strategy's efficiency at 2 devices as the report computes it."""
    points = [ThroughputPoint(s, n, layout.config_run_name(s, n), r.train.examples_per_s,
                              r.train.step_s_median) for (s, n), r in results.items()]
    return {row.strategy: row.efficiency for row in scaling_rows(points) if row.n_devices == 2}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=60)
    args = parser.parse_args()
    workload = Workload(model="mlp", steps=args.steps, warmup_steps=3, profile_steps=2,
                        histogram_every=5)
    runs: dict[str, list[dict[str, float | None]]] = {"count": [], "config": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = [("count", count_layout), ("config", config_layout)]
            for name, make in order[r % 2:] + order[:r % 2]:
                runs[name].append(efficiencies(make(Path(tmp) / f"{name}-{r}", workload)))
    ratios = []
    for strategy in STRATEGIES:
        new = [e[strategy] for e in runs["count"]]
        old = [e[strategy] for e in runs["config"]]
        print(f"{strategy}: efficiency at 2 devices, one child per count {new}, "
              f"one child per configuration {old}")
        pairs = [(a, b) for a, b in zip(new, old, strict=True) if a and b]
        noise = [b / a for a, b in itertools.pairwise(o for o in old if o)]
        if noise:
            print(f"{strategy}: one child per configuration against itself, round to round: "
                  f"{min(noise):.2f}-{max(noise):.2f}")
        ratios += [a / b for a, b in pairs]
    if not ratios:
        print("no efficiency measured")
        return 1
    print(f"median ratio (count layout / configuration layout): {statistics.median(ratios):.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
