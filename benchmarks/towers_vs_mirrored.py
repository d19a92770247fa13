"""Hand-written towers against MirroredStrategy: step time on the same devices, one run.

The same model, the same per-device batch, the same devices (GPUs when there are, else
virtual CPU devices), the same default instrumentation `gpudiag scaling` uses: one
TowerTrainer (variables on the CPU, or ``--variables-on device``) and one
MirroredTrainer. Blocks of ``--block`` steps run back to back, order rotating each round
(benchmarks/_training.py). The last line is the median per-round ratio of the towers'
step time to MirroredStrategy's: above 1 the hand-written towers are slower.

On virtual CPU devices both share the same two cores, so the ratio compares the two
programs' overheads (ops, copies, the all-reduce implementation), not interconnects.

    python benchmarks/towers_vs_mirrored.py [--devices 2] [--model cnn-small]
        [--batch-per-device 32] [--variables-on cpu] [--rounds 20] [--block 50]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _training import compare, make_side, median_ratio, median_s, setup_devices


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--model", default="cnn-small")
    parser.add_argument("--batch-per-device", type=int, default=32)
    parser.add_argument("--variables-on", choices=("cpu", "device"), default="cpu")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--block", type=int, default=50)
    parser.add_argument("--warmup", type=int, default=30)
    args = parser.parse_args()

    dev = setup_devices(args.devices)
    from gpudiag.train.mirrored import MirroredTrainer
    from gpudiag.train.model import ModelTask, model_spec
    from gpudiag.train.towers import TowerTrainer, TrainerOptions

    spec = model_spec(args.model)
    task = ModelTask(spec, (28, 28, 1), 10)
    options = TrainerOptions(batch_per_device=args.batch_per_device, learning_rate=0.05)
    batch = args.batch_per_device * len(dev.compute_devices)
    print(f"devices: {dev.to_dict()['summary']}")
    print(f"model {spec.name}, batch {args.batch_per_device}/device, towers' variables on "
          f"{args.variables_on}; blocks of {args.block} steps, {args.rounds} rounds")
    towers = make_side("towers", TowerTrainer(task, dev.compute_devices, options,
                                              variables_on=args.variables_on), batch)
    mirrored = make_side("mirrored", MirroredTrainer(task, dev.compute_devices, options), batch)
    per = compare([towers, mirrored], rounds=args.rounds, block=args.block, warmup=args.warmup)
    t_t, t_m = median_s(per, "towers"), median_s(per, "mirrored")
    print(f"towers {t_t * 1e3:.3f} ms/step ({batch / t_t:,.0f} ex/s), mirrored "
          f"{t_m * 1e3:.3f} ms/step ({batch / t_m:,.0f} ex/s) (medians over rounds)")
    print(f"towers / mirrored step time ratio: {median_ratio(per, 'towers', 'mirrored'):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
