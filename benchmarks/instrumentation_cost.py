"""What gpudiag's training instrumentation costs a step, measured side by side in one run.

One tower trainer with the instrumentation `gpudiag scaling` uses by default (per-step
scalars: loss, accuracy, learning rate, per-tower loss, examples/sec, sec/batch, the
global norms of the averaged gradients and of the moving averages, buffered and written
every 25 steps; histograms of the first and the last layer's averaged gradient and
weights at step 1 and every 100 steps; the moving average of the weights updated every
step), and two bare views of the same trainer: the same variables, optimizer and
devices, a step function traced with none of it (no scalars, norms, histograms or
moving average). The two bare views are identical, so their ratio is the noise floor of
the machine. (Separately built trainers are not compared: on a shared 2-core machine
two identical ones differed by up to 5 %, more than what is measured here.) Blocks of
``--block`` steps (by default the histogram period, so each block holds exactly one
histogram step) run back to back, the order rotating each round
(benchmarks/_training.py). The ratio to each bare view is printed, and last the median
per-round ratio of the instrumented step time to the mean of the two bare ones: the
target is <= 1.03 at default settings, read beside the noise floor printed above it.

The profiler window, the evaluation and the checkpoint happen once per run, outside the
timed steps, and are not counted here.

    python benchmarks/instrumentation_cost.py [--devices 2] [--model cnn-small]
        [--batch-per-device 32] [--rounds 30] [--block 100]
"""

from __future__ import annotations

import argparse
import copy
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from _training import (
    compare,
    make_side,
    median_ratio,
    median_ratio_to_mean,
    median_s,
    setup_devices,
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--devices", type=int, default=2)
    parser.add_argument("--model", default="cnn-small")
    parser.add_argument("--batch-per-device", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--block", type=int, default=None,
                        help="steps per block (default: the histogram period, so every "
                             "block holds exactly one histogram step)")
    parser.add_argument("--warmup", type=int, default=30,
                        help="untimed steps per side first (tracing, first scalar flush)")
    args = parser.parse_args()

    dev = setup_devices(args.devices)
    import tensorflow as tf

    from gpudiag.train.model import ModelTask, model_spec
    from gpudiag.train.summaries import Instrumentation
    from gpudiag.train.towers import TowerTrainer, TrainerOptions

    spec = model_spec(args.model)

    def bare_view(trainer: TowerTrainer) -> TowerTrainer:
        """``trainer``'s state with a step traced without any instrumentation."""
        view = copy.copy(trainer)
        view.instr, view.ema = Instrumentation.off(), None
        view._step_fn = tf.function(view._step)
        view._graph = None
        return view

    default = Instrumentation()
    block = args.block or default.histogram_every
    print(f"devices: {dev.to_dict()['summary']}")
    print(f"model {spec.name}, batch {args.batch_per_device}/device; instrumented: scalars "
          f"and norms every step, 2 layers' histograms every {default.histogram_every} "
          f"steps, EMA decay "
          f"{default.ema_decay}; blocks of {block} steps, {args.rounds} rounds")
    batch = args.batch_per_device * args.devices
    instrumented = TowerTrainer(ModelTask(spec, (28, 28, 1), 10), dev.compute_devices,
                                TrainerOptions(batch_per_device=args.batch_per_device,
                                               learning_rate=0.05, instrumentation=default))
    sides = [make_side("instrumented", instrumented, batch),
             make_side("bare", bare_view(instrumented), batch),
             make_side("bare-control", bare_view(instrumented), batch)]
    per = compare(sides, rounds=args.rounds, block=block, warmup=args.warmup)
    print(f"instrumented {median_s(per, 'instrumented') * 1e3:.3f} ms/step, bare "
          f"{median_s(per, 'bare') * 1e3:.3f} ms/step (medians over rounds)")
    print(f"noise floor (bare-control / bare, two identical bare trainers): "
          f"{median_ratio(per, 'bare-control', 'bare'):.3f}")
    print(f"instrumented / bare {median_ratio(per, 'instrumented', 'bare'):.3f}, "
          f"instrumented / bare-control {median_ratio(per, 'instrumented', 'bare-control'):.3f}")
    print(f"instrumentation cost ratio (instrumented / mean of the two bare step times, "
          f"target <= 1.03): "
          f"{median_ratio_to_mean(per, 'instrumented', ['bare', 'bare-control']):.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
