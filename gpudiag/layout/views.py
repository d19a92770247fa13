"""On-disk names of the TensorBoard views (tbviews, tbcheck); part of gpudiag.layout."""

from __future__ import annotations

from gpudiag.layout.names import Indexed

# ============================================================ TensorBoard views
# What `gpudiag tensorboard` shows and checks (gpudiag/tb/views.py writes it, tb/check.py
# checks it): the findings' own text tag, the per-configuration results the HParams
# dashboard reads, the training norms, the custom-scalars layout's charts.

# report run: the short verdict (gpudiag.verdicts.headline.card, five lines at most); sorts first of
# the text tags, so it is the Text tab's first card
TAG_VERDICT = "findings/answer"
TAG_DIFF = "gpudiag/diff"  # report run (diff): step time per loop, A against B
TAG_FINDINGS = "findings/summary"  # report run: one line per finding; sorts before gpudiag/*
# report run, with a bottleneck finding (run, explain, scaling): those findings with their
# numbers and fixes, sorting before the summary, so the Text tab shows the answer first
TAG_BOTTLENECK = "findings/bottleneck"
TAG_BREAKDOWN_PLOT = "gpudiag/breakdown_plot"  # report run: the step breakdown, a bar each
BREAKDOWN_PNG = "breakdown.png"  # the same picture in the run directory
TAG_ALLREDUCE_PLOT = "gpudiag/allreduce_plot"  # report run (scaling): bandwidth vs size
ALLREDUCE_PNG = "allreduce.png"

# A scaling configuration's run, written by the parent after the verdicts: the report's
# figures for that configuration, each as a flat line over the training steps (the value
# at the first and at the last step: a Time Series card shows every configuration's
# figure as one level line, which neither smoothing nor "ignore outliers" can move or
# hide), and the HParams dashboard's metrics (its value is the tag's last value). Named
# so that Time Series, which sorts groups and cards by tag, shows them first, examples/s
# first.
BY_CONFIG = "by_config"
TAG_BY_CONFIG_EXAMPLES_PER_S = f"{BY_CONFIG}/examples_per_s"  # median over timed steps
TAG_BY_CONFIG_SPEEDUP = f"{BY_CONFIG}/speedup"  # vs the same strategy on 1 device
TAG_BY_CONFIG_EFFICIENCY = f"{BY_CONFIG}/scaling_efficiency"  # speedup / devices
TAG_BY_CONFIG_FINAL_LOSS = f"{BY_CONFIG}/final_loss"  # mean of the last 10 steps
TAG_BY_CONFIG_FINAL_ACCURACY = f"{BY_CONFIG}/final_accuracy"
# `gpudiag run`: the program's median step period (start to start, timed steps only)
TAG_BY_CONFIG_STEP_TIME = f"{BY_CONFIG}/step_time_s"


#: The configuration's <i>-th device's busy share of the profiled window.
busy_share_tag = Indexed(f"{BY_CONFIG}/trace_busy_share_dev{{}}")


#: Mean NVML utilization (percent) of GPU <i> while the configuration ran.
nvml_util_mean_tag = Indexed(f"{BY_CONFIG}/util_nvml_mean_gpu{{}}")


# The HParams dashboard: one trial per configuration (session run = the configuration's
# run), the hyperparameters that tell configurations apart, in this order.
HPARAM_DEVICES = "devices"
HPARAM_STRATEGY = "strategy"
HPARAM_BATCH_PER_DEVICE = "batch_per_device"
HPARAM_GLOBAL_BATCH = "global_batch"
HPARAM_VARIABLES_ON = "variables_on"
HPARAM_MODEL = "model"
HPARAM_DATA = "data"
HPARAMS = (HPARAM_DEVICES, HPARAM_STRATEGY, HPARAM_BATCH_PER_DEVICE, HPARAM_GLOBAL_BATCH,
           HPARAM_VARIABLES_ON, HPARAM_MODEL, HPARAM_DATA)
# `gpudiag run`: one trial per TensorFlow process of the user's program (session run =
# program-<pid>/), its hyperparameters as the hooks observed them, where they did.
HPARAM_PROGRAM = "program"  # the script or module the command ran
HPARAM_OPTIMIZER = "optimizer"  # the Keras optimizer's class
HPARAM_LEARNING_RATE = "learning_rate"  # its learning rate when fit began
HPARAM_STEPS = "steps"  # training steps seen of its longest loop
RUN_HPARAMS = (HPARAM_PROGRAM, HPARAM_DEVICES, HPARAM_STRATEGY, HPARAM_BATCH_PER_DEVICE,
               HPARAM_GLOBAL_BATCH, HPARAM_OPTIMIZER, HPARAM_LEARNING_RATE, HPARAM_STEPS,
               HPARAM_MODEL)
# Every gpudiag HParams experiment lists all of them: TensorBoard takes one experiment of
# a logdir (the first it finds), so scaling's and run's trials show in either one.
ALL_HPARAMS = (*HPARAMS, *(h for h in RUN_HPARAMS if h not in HPARAMS))


def trial_name(run_dir_name: str, config: str) -> str:
    """The HParams trial (session group) of configuration ``config`` of a run directory:
    unique across the run directories of a logdir, the configuration's name first."""
    return f"{config} {run_dir_name}"


# Every step, in a configuration's run (the training child): global norms, the loss of
# each MirroredStrategy replica (towers write tower_loss_tag).
TAG_NORM_GRADIENTS = "norms/gradients"  # of the averaged gradients the update applied
TAG_NORM_EMA = "norms/ema"  # of the weights' moving averages


#: Scalar, every step (mirrored): the loss of replica <i>'s slice.
replica_loss_tag = Indexed("replicas/loss_{}")
